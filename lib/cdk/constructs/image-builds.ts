import { Duration } from 'aws-cdk-lib';
import type * as codebuild from 'aws-cdk-lib/aws-codebuild';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { keepStackLevelIds } from '../logical-ids.js';
import { imageBuildWaitSeconds } from '../workflow-definitions.js';
import { expiringBucket } from './expiring-bucket.js';
import { type ImageBuildArchitecture, ImageBuildProject } from './image-build-project.js';

/** A build (its queue time included) must end this long before the BuildImages task times out. */
const imageBuildMarginSeconds = 5 * 60;

/** The image-build settings of StatelessStack. */
export interface ImageBuildsOptions {
  /**
   * How long a staged source archive stays in the artifacts bucket (whole days). A build reads it within
   * the hour; a redeploy of the same commit after expiry stages it again.
   * @default Duration.days(7)
   */
  artifactsExpiration?: Duration;
  /**
   * The architecture image builds run on, and so the architecture of every app image. x86_64 because most
   * Dockerfiles, base images and EKS node groups assume amd64; arm64 is cheaper where every app supports it.
   * @default 'x86_64'
   */
  imageBuildArchitecture?: ImageBuildArchitecture;
  /** The build's CodeBuild compute type. @default codebuild.ComputeType.SMALL */
  imageBuildComputeType?: codebuild.ComputeType;
  /**
   * How long one image build (all apps of an environment, in turn) may run. With `imageBuildQueuedTimeout`
   * it must end at least 5 minutes before the BuildImages task times out.
   * @default Duration.minutes(30)
   */
  imageBuildTimeout?: Duration;
  /** How long a build may wait for CodeBuild capacity. @default Duration.minutes(20) */
  imageBuildQueuedTimeout?: Duration;
}

export interface ImageBuildsProps extends ImageBuildsOptions {
  /** The app-image repository builds push to (the stateful stack's). */
  imageRepository: ecr.IRepository;
  /** Retention of the build log group. */
  logRetention: logs.RetentionDays;
}

/**
 * Image builds: owns the artifacts bucket (staged source archives, `sources/<orgId>/<owner>/<repo>/<sha>
 * .tar.gz`, expiring) and the CodeBuild project that builds app images from them (`ImageBuildProject`, with its
 * log group). The steps and event targets that use them are granted by their access (`bindArtifacts`,
 * `bindImageBuilds`).
 */
export class ImageBuilds extends Construct {
  /** Staged source archives, expiring after `artifactsExpiration`. */
  readonly artifacts: s3.Bucket;
  /** The build project, its log group and the repository it pushes to. */
  readonly imageBuild: ImageBuildProject;

  constructor(scope: Construct, id: string, props: ImageBuildsProps) {
    super(scope, id);
    this.artifacts = expiringBucket(this, 'ArtifactsBucket', {
      expiration: props.artifactsExpiration ?? Duration.days(7),
      expirationName: 'artifactsExpiration',
      lifecycleRuleId: 'expire-staged-artifacts',
      withoutAccessLog: (days) =>
        'Holds only short-lived copies of source archives that GitHub already holds (expiring after ' +
        `${days} days), written and read by two roles (FetchSource, the image build) under sources/.`,
    });
    const timeout = props.imageBuildTimeout ?? Duration.minutes(30);
    const queuedTimeout = props.imageBuildQueuedTimeout ?? Duration.minutes(20);
    const waitSeconds = imageBuildWaitSeconds();
    if (timeout.toSeconds() + queuedTimeout.toSeconds() > waitSeconds - imageBuildMarginSeconds) {
      throw new Error(
        `imageBuildTimeout + imageBuildQueuedTimeout must end ${imageBuildMarginSeconds / 60} minutes before ` +
          `the BuildImages task times out (${waitSeconds / 60} minutes)`,
      );
    }
    this.imageBuild = new ImageBuildProject(this, 'ImageBuild', {
      artifacts: this.artifacts,
      repository: props.imageRepository,
      architecture: props.imageBuildArchitecture,
      computeType: props.imageBuildComputeType,
      timeout,
      queuedTimeout,
      logRetention: props.logRetention,
    });
    keepStackLevelIds(this.imageBuild.logGroup, this.imageBuild);
  }
}
