import * as ecr from 'aws-cdk-lib/aws-ecr';
import { BUILD_CACHE_TAG_PREFIX } from '../../../functions/ports/runtime/codebuild/builder.js';

/** How the image repository's lifecycle treats the image builds' layer caches. */
export interface BuildCacheLifecycleOptions {
  /**
   * Layer caches kept (one per app, tagged `buildcache-<scope>`, moved by every build of the app), newest
   * first: an app whose cache expired builds once from scratch and makes a new one. A cache an app's
   * build replaced is untagged, and goes with the repository's other untagged images.
   * @default 200
   */
  buildCacheRetentionCount?: number;
}

/**
 * The lifecycle rule that bounds the layer caches BuildKit keeps in the image repository (the buildspec's
 * `--cache-to type=registry,ref=<repository>:buildcache-<scope>`, image-build-project.ts). Its priority
 * comes before the rule of tag status ANY (which ECR requires last), so cache images neither count against
 * the app images kept nor outlive `buildCacheRetentionCount`.
 */
export function addBuildCacheLifecycle(
  repository: ecr.Repository,
  rulePriority: number,
  opts: BuildCacheLifecycleOptions = {},
): void {
  const count = opts.buildCacheRetentionCount ?? 200;
  if (!Number.isInteger(count) || count < 1)
    throw new Error('buildCacheRetentionCount must be a positive whole number');
  repository.addLifecycleRule({
    rulePriority,
    description: 'Keep the newest layer caches of image builds',
    tagStatus: ecr.TagStatus.TAGGED,
    tagPrefixList: [BUILD_CACHE_TAG_PREFIX],
    maxImageCount: count,
  });
}
