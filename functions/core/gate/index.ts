/*
 * The merge gate, the front of the domain: a GitHub check run per head commit of a pull request from its
 * preview's `run_on_preview` tests, brought to what is stored by every place that moves its story
 * (gate.ts), and the story it tells (story.ts).
 */

export {
  attachRuns,
  CHECK_RUN_NAME,
  type GateDeps,
  type GateOutcome,
  type GateRecord,
  gateKeyOf,
  gateRecord,
  syncGate,
  syncGateOfRun,
} from './gate.js';
export {
  type CommitPageRef,
  commitPageLink,
  commitPagePath,
  commitViewUrl,
  type GateLinks,
  gateLinks,
} from './links.js';
export { type CommitPageAnswer, renderCommitPage, serveCommitPage } from './page.js';
export {
  listQuarantined,
  QUARANTINE_MAX_DAYS,
  type QuarantineView,
  quarantineCap,
  quarantineTest,
  unquarantineTest,
} from './quarantine.js';
export { type GateRequestDetail, onGateRequested, SKIP_REFUSED, skipGate } from './requests.js';
export { conclusionOf, type GateEnd, type GateRun, renderOutput } from './story.js';
export {
  type CommitView,
  type CommitViewRun,
  commitView,
  type GateState,
  latestGate,
} from './views.js';
