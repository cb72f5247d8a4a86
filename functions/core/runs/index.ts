export { executeRun, executionsSettled } from './execution/executor.js';
export {
  failRun,
  type PreparedRun,
  prepareRun,
  RunNotOwned,
  runFailureMessage,
  startPreviewRuns,
  startRun,
} from './lifecycle.js';
export { listRunPage } from './listing.js';
export { recoverRuns, sweepStaleRuns } from './recovery.js';
export { reportLink, serveRunReport } from './report.js';
export { loadRun, RUN_STATUSES, type RunTarget } from './store.js';
export {
  inlineFonts,
  isTextType,
  TRACE_VIEWER_PATH,
  traceViewerFile,
  traceViewerType,
} from './trace-viewer.js';
export { getRun } from './views.js';
