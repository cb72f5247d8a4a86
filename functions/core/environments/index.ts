/*
 * Preview environments, the front of the domain: the record and what callers see of it (types.ts); every
 * request that moves an environment, deploy, redeploy, teardown, resume, and its reads (lifecycle.ts); the
 * order of source-host events (source-order.ts); what the pipeline's steps share (pipeline.ts), what an
 * app's build reads (build-inputs.ts), preview.yaml (preview-config.ts), how the apps start (launch.ts);
 * expiry and stranded work (expiry.ts); the status on the pull request (pr-status.ts); app and build logs
 * (logs.ts); the apps the environments of a repository declare (declared-apps.ts); `services:` of
 * preview.yaml (preview-services.ts) and their credentials (services.ts).
 */

export { buildInputs } from './build-inputs.js';
export { undeclaredAppWarning } from './declared-apps.js';
export { sweepExpired, sweepFences } from './expiry.js';
export { type LaunchPlan, planLaunch } from './launch.js';
export {
  environmentAccessUrls,
  environmentStatus,
  findEnvironment,
  listEnvironments,
  liveEnvironments,
  type Resumption,
  recordAsleep,
  requestAppRedeploy,
  requestMainBranchDeploy,
  requestPrDeploy,
  requestRedeploy,
  requestTeardown,
  resumeEnvironment,
  statusPath,
} from './lifecycle.js';
export { appLogs, buildSecretValues, DEFAULT_TAIL_LINES, MAX_TAIL_LINES } from './logs.js';
export {
  beginAppStep,
  type CallbackEvent,
  DeployFailed,
  failureMessage,
  isCurrent,
  loadCurrent,
  runtimeTarget,
  type StepInput,
  Superseded,
  stageSource,
  stopFailedApps,
  transition,
} from './pipeline.js';
export { ownerTag, reportStatus } from './pr-status.js';
export {
  PREVIEW_CONFIG_PATH,
  type PreviewConfig,
  PreviewConfigError,
  parsePreviewConfig,
} from './preview-config.js';
export { forgetServiceCredentials, serviceLaunches, serviceStates } from './services.js';
export { orderKey, StaleEvent } from './source-order.js';
export type { Environment } from './types.js';
