/*
 * Test runs, the front of the domain: a run as stored, its key and media keys (store.ts); every write of
 * its lifecycle (lifecycle.ts); where it goes (target.ts) and the environment it names (environment.ts);
 * what callers see (views.ts) and GET /run's pages (listing.ts); the report (report.ts) and the trace
 * viewer it links to (trace-viewer.ts); runs left behind (recovery.ts); a run's heals kept in its test
 * (kept-heals.ts). How a run executes, one attempt
 * after another, its steps, its scenario and its deadline: execution/.
 */

export { executeRun, executionsSettled } from './execution/executor.js';
export { type HealPlan, type KeptHeal, keepHeals, planKeptHeals } from './kept-heals.js';
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
