import { AwsJsonClient, CLOUDWATCH_LOGS, CODEBUILD, ECR, type JsonService } from '../../shared/aws-json.js';
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { BuildLogs } from '../runtime/build-logs.js';
import { CodeBuildImages, type CodeBuildImagesOptions } from '../runtime/codebuild-images.js';
import type { Runtime } from '../runtime/port.js';
import { adapter, once, required } from './adapters.js';
import { workflows } from './workflows.js';

/** CodeBuild images with the settings of the stack and the clients given (see the getters below). */
function images(clients: Pick<CodeBuildImagesOptions, 'codebuild' | 'ecr' | 'logs'>): CodeBuildImages {
  const c = config();
  return new CodeBuildImages({
    ...clients,
    project: required(c.imageBuilds.project, 'IMAGE_BUILD_PROJECT'),
    repositoryUri: required(c.imageBuilds.repositoryUri, 'IMAGE_REPOSITORY_URI'),
    artifactsBucket: required(c.artifactsBucket, 'ARTIFACTS_BUCKET'),
    complete: (token, outcome) => workflows().completeTask(token, outcome),
  });
}
/** The JSON-protocol client of `service` (shared/aws-json.ts), created on first use, once per container. */
const client = (service: JsonService) => once(() => new AwsJsonClient(service, { region: config().region }));
const codebuildClient = /* @__PURE__ */ client(CODEBUILD);
const ecrClient = /* @__PURE__ */ client(ECR);
const logsClient = /* @__PURE__ */ client(CLOUDWATCH_LOGS);

/**
 * The image half of the cloud runtime (CodeBuild, ECR, the build log), once per container: what the whole
 * `runtime` (runtime.ts) builds with. The handlers take narrower getters, each with only the clients its
 * calls use: `buildRuntime` (CodeBuild and ECR), `imageBuilds` (ECR and CloudWatch Logs), `buildLogs`.
 */
export const codeBuildImages = /* @__PURE__ */ once(() =>
  images({ codebuild: codebuildClient(), ecr: ecrClient(), logs: logsClient() }),
);

/** The image builds' logs alone (CloudWatch Logs), for the app-logs route (registry/runtime.ts `logsRuntime`). */
export const buildLogs = /* @__PURE__ */ once(() => new BuildLogs(logsClient()));

/**
 * The runtime as the BuildImages step uses it: `build` only. AWS: CodeBuild images with the CodeBuild and
 * ECR clients (start a build, reuse an image that exists; no CloudWatch Logs client); local: the one local
 * runtime.
 */
export const buildRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'build'>>('runtime', () =>
  images({ codebuild: codebuildClient(), ecr: ecrClient() }),
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
const finishedBuilds = /* @__PURE__ */ once(() => images({ ecr: ecrClient(), logs: logsClient() }));
