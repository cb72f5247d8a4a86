import { keys } from '../../manifest/tables.js';
import type { SecretStore } from '../../ports/secret-store/port.js';
import { queryItems, scanItems, table } from '../../shared/aws/dynamo.js';
import { log } from '../../shared/log.js';
import type { FactoryClientOptions } from '../scenarios/index.js';
import { sendOwedDown } from '../scenarios/index.js';
import { executorReserveMs } from './execution/deadline.js';
import { failRun } from './lifecycle.js';
import { loadRun, type RunItem } from './store.js';

/*
 * Runs nobody will end: after the local server restarted (`recoverRuns`, every run left
 * `pending` or `running`), and in AWS (`sweepStaleRuns`, the `runSweep` schedule: runs left so past their
 * time limit that no execution can still be running them: a MarkFailed that never ran, an execution that
 * ended while its run stayed `running`). Both end each such run `failed` with the reason and send the
 * scenario `down` it owes, claimed first (core/scenarios/state.ts, claimDown), so the executor, MarkFailed,
 * the recovery and the sweep never send it twice.
 */

type Status = 'running' | 'pending';

/** Every run id of `status`, of every organization (the tenancy table lists them; `listStatus` index). */
async function* runsWithStatus(status: Status): AsyncGenerator<string> {
  const orgIds: string[] = [];
  for await (const item of scanItems({
    TableName: table('tenancy'),
    FilterExpression: 'begins_with(pk, :org)',
    ExpressionAttributeValues: { ':org': keys.tenancy.org('') },
    ProjectionExpression: 'orgId',
  }))
    orgIds.push(String(item.orgId));
  for (const orgId of orgIds) {
    // The index holds keys only: each run is read whole by the caller.
    for await (const { runId } of queryItems<Pick<RunItem, 'runId'>>({
      TableName: table('runs'),
      IndexName: 'listStatus',
      KeyConditionExpression: 'statusKey = :k',
      ExpressionAttributeValues: { ':k': keys.runs.byStatus(orgId, status) },
    }))
      yield runId;
  }
}

/**
 * End one abandoned run: `failed` with `reason` unless it already ended, then its owed `down` (claimed
 * as `by`: sent once whoever else tries). Returns whether this call failed it.
 */
export async function endAbandonedRun(
  deps: { secrets?: SecretStore },
  runId: string,
  reason: string,
  opts: { by: string; factory?: FactoryClientOptions },
): Promise<boolean> {
  const failed = await failRun(runId, reason);
  // A run abandoned after its scenario came up still owes the factory its `down` (scenario data).
  if (deps.secrets) {
    const item = await loadRun(runId);
    if (item?.scenarioState)
      await sendOwedDown({ secrets: deps.secrets }, item, { ...opts.factory, by: opts.by });
  }
  return failed;
}

/**
 * After the local server restarted, no run is left `running` or `pending` with nothing behind it. Each
 * such run ends `failed` saying so: a `running` run's browser is gone, and re-running its steps could
 * repeat what they did to the app; a `pending` one would meet its environment restarting too (recovery
 * restarts ready environments), so starting it again would only fail it as "not ready". `onEnded` is told
 * of each run it ended (the merge gate completes the check run the run belonged to).
 */
export async function recoverRuns(
  deps: { secrets?: SecretStore; onEnded?: (runId: string) => Promise<unknown> } = {},
): Promise<{ failed: number }> {
  let failed = 0;
  const reasons = {
    running: 'interrupted: the service restarted while the run was running',
    pending: 'interrupted: the service restarted before the run started; start it again',
  };
  for (const status of ['running', 'pending'] as const) {
    for await (const runId of runsWithStatus(status)) {
      try {
        if (await endAbandonedRun(deps, runId, reasons[status], { by: 'recovery' })) {
          failed++;
          await deps.onEnded?.(runId);
        }
      } catch (err) {
        log.error('could not recover a test run', { runId, error: (err as Error).message });
      }
    }
  }
  if (failed > 0) log.info('test runs recovered', { failed });
  return { failed };
}

/**
 * How long after it started a `running` run may still be executed: the Execute state's TimeoutSeconds
 * (900 s, statemachines/test-run.asl.json), since a run's limit is at most 840 s and the executor stops
 * its steps in time to keep its reserve; a retried Execute that waits for a dead first one ends the run
 * at that one's lease, within it too.
 */
export const EXECUTE_STATE_MS = 900_000;
/**
 * Past what a `running` run is abandoned: the later of the Execute state's limit and the run's own limit
 * plus the executor's reserve, plus this margin (MarkFailed's retries, up to ~6 min, and clock skew).
 */
export const SWEEP_MARGIN_MS = 10 * 60_000;
/**
 * Past what a `pending` run is abandoned: Prepare takes at most 60 s a try, 5 tries with backoff
 * (~6 min), then MarkFailed; a run still pending 20 minutes after it was created has no execution.
 */
export const PENDING_STALE_MS = 20 * 60_000;

/** When run `run` counts as abandoned (epoch ms), given the run timeout it falls back on. */
export function abandonedAt(
  run: Pick<RunItem, 'status' | 'createdAt' | 'startedAt' | 'runTimeoutSeconds'>,
  defaultRunTimeoutSeconds: number,
): number {
  if (run.status === 'pending') return Date.parse(run.createdAt) + PENDING_STALE_MS;
  const runMs = (run.runTimeoutSeconds ?? defaultRunTimeoutSeconds) * 1000;
  const executing = Math.max(EXECUTE_STATE_MS, runMs + executorReserveMs({ scenario: true }));
  return Date.parse(run.startedAt ?? run.createdAt) + executing + SWEEP_MARGIN_MS;
}

/**
 * The AWS sweep (schedule `runSweep`): every run `pending` or `running` past `abandonedAt` ends `failed`
 * with the reason and sends its owed `down` once. Stops when `remainingMs` says its own time is nearly up
 * (the next sweep carries on). Returns what it found and ended.
 */
export async function sweepStaleRuns(deps: {
  secrets: SecretStore;
  defaultRunTimeoutSeconds: number;
  now?: () => number;
  remainingMs?: () => number;
  factory?: FactoryClientOptions;
  /** Told of each run the sweep ended (the merge gate completes its check run). */
  onEnded?: (runId: string) => Promise<unknown>;
}): Promise<{ checked: number; failed: number; downs: number }> {
  const now = deps.now ?? Date.now;
  let checked = 0;
  let failed = 0;
  let downs = 0;
  for (const status of ['running', 'pending'] as const) {
    for await (const runId of runsWithStatus(status)) {
      // A `down` may take its whole retry window: stop while one still fits.
      if (deps.remainingMs && deps.remainingMs() < 45_000) {
        log.warn('run sweep stopped: its time is nearly up', { checked });
        return { checked, failed, downs };
      }
      checked++;
      try {
        const run = await loadRun(runId);
        if (run?.status !== status) continue;
        const at = abandonedAt(run, deps.defaultRunTimeoutSeconds);
        if (now() < at) continue;
        const minutes = Math.round((now() - Date.parse(run.startedAt ?? run.createdAt)) / 60_000);
        const reason =
          status === 'running'
            ? `abandoned: the run was still running ${minutes} min after it started, past its time limit ` +
              `(${run.runTimeoutSeconds ?? deps.defaultRunTimeoutSeconds} s) and its executor's; nothing ` +
              'was left to end it'
            : `abandoned: the run was still pending ${minutes} min after it was created; start it again`;
        if (await failRun(runId, reason)) {
          failed++;
          await deps.onEnded?.(runId);
        }
        const ended = await loadRun(runId);
        if (ended?.scenarioState && (await sendOwedDown(deps, ended, { ...deps.factory, by: 'sweep' })))
          downs++;
      } catch (err) {
        log.error('could not sweep a test run', { runId, error: (err as Error).message });
      }
    }
  }
  if (failed > 0) log.info('stale test runs failed', { failed, downs });
  return { checked, failed, downs };
}
