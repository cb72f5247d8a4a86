import { config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { CodeBuildImages, type CodeBuildImagesOptions } from '../../runtime/codebuild/images.js';
import type { ImageBuilder } from '../../runtime/port.js';
import { adapter, once, required } from '../adapters.js';
import { cloudWatchLogsClient, codeBuildClient, ecrClient } from '../aws-clients.js';
import { workflows } from '../workflows.js';

/** CodeBuild images with the settings of the stack and the clients given (see the getters below). */
function images(clients: Pick<CodeBuildImagesOptions, 'codebuild' | 'ecr' | 'logs'>): CodeBuildImages {
  const c = config();
  return new CodeBuildImages({
    ...clients,
    project: required(c.imageBuilds.project, 'IMAGE_BUILD_PROJECT'),
    repositoryUri: required(c.imageBuilds.repositoryUri, 'IMAGE_REPOSITORY_URI'),
    artifactsBucket: c.artifactsBucket, // builds need it (CodeBuildImages.build); the completion events not
    // Where a build's log is while it runs (the project logs there): without it, only a finished build's.
    logGroup: c.imageBuilds.logGroup,
    complete: (token, outcome) => workflows().completeTask(token, outcome),
  });
}

/**
 * The image half of the cloud runtime (CodeBuild, ECR, the build log), once per container: what the whole
 * `runtime` (whole.ts) builds with. The handlers take narrower getters, each with only the clients its
 * calls use: `imageBuilder` (CodeBuild and ECR), `imageBuilds` (ECR and CloudWatch Logs), and the build
 * logs' reader of app-logs.ts.
 */
export const codeBuildImages = /* @__PURE__ */ once(() =>
  images({ codebuild: codeBuildClient(), ecr: ecrClient(), logs: cloudWatchLogsClient() }),
);

/**
 * The `ImageBuilder` role, for the BuildImages step. AWS: CodeBuild images with the CodeBuild and ECR
 * clients (start a build, reuse an image that exists; no CloudWatch Logs client); local: the one local
 * runtime.
 */
export const imageBuilder = /* @__PURE__ */ adapter<'runtime', ImageBuilder>('runtime', () =>
  images({ codebuild: codeBuildClient(), ecr: ecrClient() }),
);

/**
 * The image builds of the cloud runtime, for the handler of their completion events (AWS mode only): with
 * the ECR client (the pushed images) and CloudWatch Logs (a failed build's log), not CodeBuild's.
 */
export function imageBuilds(): CodeBuildImages {
  if (config().mode === 'local')
    throw new ConfigError('image-build events come from CodeBuild: AWS mode only');
  return finishedBuilds();
}
const finishedBuilds = /* @__PURE__ */ once(() => images({ ecr: ecrClient(), logs: cloudWatchLogsClient() }));
