/**
 * The image builder of the cloud runtime, as both its halves name it: the CDK buildspec (lib/cdk/
 * image-build.ts) runs it, and CodeBuildImages hashes its version into every app's build identity
 * (build-identity.ts), so that a change of builder makes new images rather than reusing old ones.
 */

/** The BuildKit image `docker buildx` runs (the docker-container driver: registry cache export needs it). */
export const BUILDKIT_IMAGE = 'moby/buildkit:v0.13.2';

/** Bump when the buildspec changes what an image holds: every identity changes, nothing old is reused. */
export const IMAGE_BUILDER_VERSION = `codebuild-buildx/2 ${BUILDKIT_IMAGE}`;

/**
 * The tag prefix of each app's layer cache in the image repository (`buildcache-<scope>`, one tag per
 * app, moved by every build). The repository's lifecycle keeps a bounded number of them, apart from the
 * app images (lib/cdk/constructs/build-cache.ts).
 */
export const BUILD_CACHE_TAG_PREFIX = 'buildcache-';

/** The manifest annotation a build writes the commit it was built from into (the buildspec's `--annotation`). */
export const REVISION_ANNOTATION = 'org.opencontainers.image.revision';
