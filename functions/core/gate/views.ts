import { keys } from '../../manifest/tables.js';
import type { CheckRunConclusion, CheckRunStatus } from '../../ports/pr-status/port.js';
import { log } from '../../shared/log.js';
import { type GateRecord, gateRecord, getRecord, storyRuns } from './gate.js';
import { type GateEnd, type GateRun, renderOutput } from './story.js';

/*
 * What people read of the merge gate besides GitHub: the gate of an environment's latest head (the
 * environment status's `gate` field) and the view of one head commit (its check run's state, title, what
 * ended it and each run: the dashboard's per-commit view, and the signed page the check run links to in
 * AWS). Read from what is stored, the same record and runs the check run is brought from; the title is
 * the one the check run shows for that state (story.ts).
 */

type EnvRef = { orgId: string; envKey: string };

/** The gate of an environment's latest head: the environment status's `gate` field. */
export interface GateState {
  status: CheckRunStatus;
  conclusion?: CheckRunConclusion;
  title: string;
  headSha: string;
}

/** One run of a head commit's story, as the views show it. */
export interface CommitViewRun {
  runId: string;
  testId: string;
  name: string;
  status: GateRun['status'];
  /** From its start to its end; absent while it has not both. */
  durationMs?: number;
  retries: number;
  flaky: boolean;
  /** The run failed because the preview never answered (not the test). */
  previewNeverAnswered?: true;
  /** Its failure does not fail the gate: who owns the quarantine, why, until when. */
  quarantine?: { owner: string; reason: string; until: string };
  /** The failed step: its number and interaction. */
  failedStep?: { number: number; interaction: string };
  error?: string;
  /** A signed link to its report (when the caller can mint one). */
  reportUrl?: string;
}

/** One head commit's gate: the check run's state and story, and its runs. */
export interface CommitView {
  repoFullName: string;
  prNumber: number;
  sha: string;
  /** The story's number on this head: 1, then one more per re-run or new deploy of the head. */
  story: number;
  status: CheckRunStatus;
  conclusion?: CheckRunConclusion;
  title: string;
  /** What ended the story other than its runs (a skip names who and why). */
  end?: GateEnd;
  completedAt?: string;
  runs: CommitViewRun[];
}

/** The title the check run shows for a record in its stored state. */
const titleOf = (record: GateRecord, runs: GateRun[]) =>
  renderOutput(runs, record.end, record.state === 'completed').title;

const durationOf = (r: GateRun): number | undefined =>
  r.startedAt && r.endedAt ? Math.max(0, Date.parse(r.endedAt) - Date.parse(r.startedAt)) : undefined;

function viewRun(r: GateRun): CommitViewRun {
  const durationMs = durationOf(r);
  return {
    runId: r.runId,
    testId: r.testId,
    name: r.name,
    status: r.status,
    ...(durationMs !== undefined ? { durationMs } : {}),
    retries: r.retries,
    flaky: r.flaky,
    ...(r.errorKind === 'environment' ? { previewNeverAnswered: true as const } : {}),
    ...(r.quarantined && r.quarantine ? { quarantine: r.quarantine } : {}),
    ...(r.failedStep
      ? { failedStep: { number: r.failedStep.number, interaction: r.failedStep.interaction } }
      : {}),
    ...(r.error ? { error: r.error } : {}),
  };
}

/** The sha the gate last saw as the pull request's head (its pointer), if any. */
async function latestSha(ref: EnvRef): Promise<string | undefined> {
  const pointer = (await getRecord(keys.gates.pullRequest(ref.orgId, ref.envKey))) as
    | { sha?: string }
    | undefined;
  return pointer?.sha;
}

/**
 * The gate of an environment's latest head, or undefined when it has none (the application has no
 * `run_on_preview` tests, the main branch's environment, or no head reached the gate yet).
 */
export async function latestGate(ref: EnvRef): Promise<GateState | undefined> {
  const sha = await latestSha(ref);
  const record = sha ? await gateRecord(ref, sha) : undefined;
  if (!record) return undefined;
  const runs = await storyRuns(record);
  return {
    status: record.state,
    ...(record.conclusion ? { conclusion: record.conclusion } : {}),
    title: titleOf(record, runs),
    headSha: record.sha,
  };
}

/**
 * One head commit's view (`sha` undefined: the latest head's), or undefined when that head has no check
 * run. `report` mints a run's report link; best effort: one that cannot be minted is left out, logged.
 */
export async function commitView(
  ref: EnvRef,
  sha: string | undefined,
  report?: (runId: string) => Promise<string>,
): Promise<CommitView | undefined> {
  const head = sha?.toLowerCase() ?? (await latestSha(ref));
  const record = head ? await gateRecord(ref, head) : undefined;
  if (!record) return undefined;
  const runs = await storyRuns(record);
  const shown = await Promise.all(
    runs.map(async (r) => {
      const view = viewRun(r);
      if (!report) return view;
      try {
        return { ...view, reportUrl: await report(r.runId) };
      } catch (err) {
        log.warn('could not mint a merge gate link', { what: 'report', error: (err as Error).name });
        return view;
      }
    }),
  );
  return {
    repoFullName: record.repoFullName,
    prNumber: record.prNumber,
    sha: record.sha,
    story: record.story,
    status: record.state,
    ...(record.conclusion ? { conclusion: record.conclusion } : {}),
    title: titleOf(record, runs),
    ...(record.end ? { end: record.end } : {}),
    ...(record.completedAt ? { completedAt: record.completedAt } : {}),
    runs: shown,
  };
}
