import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { ECRClient } from '@aws-sdk/client-ecr';
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { CodeBuildImages } from '../runtime/codebuild-images.js';
import type { Runtime } from '../runtime/port.js';
import { adapter, once, required } from './adapters.js';
import { workflows } from './workflows.js';

/**
 * The image half of the cloud runtime (CodeBuild, ECR, the build log), once per container: what
 * `runtime` (runtime.ts) builds with, and all that the BuildImages step and the build-event handler need,
 * so their bundles leave the cluster adapter (EKS, @kubernetes/client-node) out.
 */
export const codeBuildImages = /* @__PURE__ */ once(() => {
  const c = config();
  const region = { region: c.region };
  return new CodeBuildImages({
    codebuild: new CodeBuildClient(region),
    ecr: new ECRClient(region),
    logs: new CloudWatchLogsClient(region),
    project: required(c.imageBuilds.project, 'IMAGE_BUILD_PROJECT'),
    repositoryUri: required(c.imageBuilds.repositoryUri, 'IMAGE_REPOSITORY_URI'),
    artifactsBucket: required(c.artifactsBucket, 'ARTIFACTS_BUCKET'),
    complete: (token, outcome) => workflows().completeTask(token, outcome),
  });
});

/**
 * The runtime as the BuildImages step uses it: `build` only. AWS: the CodeBuild images (the same
 * `build` the full cloud runtime delegates to); local: the one local runtime.
 */
export const buildRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'build'>>('runtime', () =>
  codeBuildImages(),
);

/** The image builds of the cloud runtime, for the handler of their completion events (AWS mode only). */
export function imageBuilds(): CodeBuildImages {
  if (config().mode === 'local')
    throw new ConfigError('image-build events come from CodeBuild: AWS mode only');
  return codeBuildImages();
}
