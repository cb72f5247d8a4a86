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
export { appLogs, DEFAULT_TAIL_LINES, MAX_TAIL_LINES } from './logs.js';
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
export { reportStatus } from './pr-status.js';
export {
  PREVIEW_CONFIG_PATH,
  type PreviewConfig,
  PreviewConfigError,
  parsePreviewConfig,
} from './preview-config.js';
export { orderKey, StaleEvent } from './source-order.js';
export type { Environment } from './types.js';
