import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { ddb, table } from '../../shared/aws/dynamo.js';
import { ConflictError, NotFoundError } from '../../shared/errors.js';
import { findEnvironment } from '../environments/index.js';
import { startPreviewRuns } from '../runs/index.js';
import {
  attachRuns,
  bring,
  type GateDeps,
  type GateRecord,
  gateRecord,
  nextStory,
  storyRuns,
} from './gate.js';

/*
 * What the pull request asks of the gate: re-run a head's tests (all of them, or only the failed ones,
 * keeping the passed results), or skip them with a reason (`neutral`, naming who and why). A re-run opens
 * a fresh story on the same head (a new check run, completed again); a skip completes the head's story.
 */

/** A request, as the `Merge Gate Requested` event carries it (core/github/gate-requests.ts). */
export interface GateRequestDetail {
  orgId: string;
  repoFullName: string;
  prNumber: number;
  request:
    | { action: 'rerun' | 'rerun-failed'; headSha: string; by?: string }
    | { action: 'skip'; by: string; reason: string };
}

export const SKIP_REFUSED =
  'The tests were not skipped: `/preview skip-tests` needs a reason, as in `/preview skip-tests docs-only change`.';

/**
 * Act on a gate request. Steps: read the environment of the pull request (none: nothing to do); a skip
 * with an empty reason is refused by a reply comment; a skip of the current head completes its story
 * `neutral` (a completed one too: the skip is what the gate shows); a re-run of the current head, once
 * its preview is ready, opens the next story (only when the record is still at the story the request
 * saw: a redelivered or doubled request opens one) and starts its runs: every `run_on_preview` test, or
 * only those that failed, whose passed results the story keeps.
 */
export async function onGateRequested(
  deps: GateDeps & { workflows: Workflows },
  d: GateRequestDetail,
): Promise<string> {
  const envKey = keys.environments.envKey(d.repoFullName, d.prNumber);
  const env = await findEnvironment(d.orgId, envKey);
  if (!env || env.status === 'torn_down') return 'no preview of the pull request';
  const head = env.inputs?.headSha?.toLowerCase();
  if (!head) return 'the preview has no commit yet';
  const r = d.request;
  if (r.action === 'skip') {
    if (!r.reason) {
      await deps.prStatus.reply?.(d.repoFullName, d.prNumber, `@${r.by} ${SKIP_REFUSED}`);
      return 'skip refused: no reason';
    }
    const record = await gateRecord(env, head);
    if (!record) return 'no check run for the head';
    await reopen(record, { end: { kind: 'skipped', by: r.by, reason: r.reason } });
    const reopened = await gateRecord(env, head);
    if (reopened) await bring(deps, reopened);
    return `skipped by ${r.by}`;
  }
  if (r.headSha !== head) return `the pull request's head is no longer ${r.headSha.slice(0, 12)}`;
  if (env.status !== 'ready') return 'the preview is not ready';
  const record = await gateRecord(env, head);
  if (!record) return 'no check run for the head';
  let only: Set<string> | undefined;
  let kept: string[] | undefined;
  if (r.action === 'rerun-failed') {
    const runs = await storyRuns(record);
    only = new Set(runs.filter((run) => run.status === 'failed').map((run) => run.testId));
    if (only.size === 0) return 'no failed test to run again';
    kept = runs.filter((run) => run.status === 'passed').map((run) => run.runId);
  }
  if (!(await nextStory(record, kept))) return 'a re-run was opened already';
  const runIds = await startPreviewRuns(deps, env, { gateKey: record.pk, ...(only ? { only } : {}) });
  await attachRuns(deps, env, runIds);
  return `${r.action === 'rerun' ? 'every test' : `${only!.size} failed test(s)`} running again`;
}

/**
 * Skip the tests of a pull request's head through the API (`previewctl gate skip`), as
 * `/preview skip-tests <reason>` does from the pull request. Steps: the environment must be the
 * caller's (404 otherwise); its head must have a check run (409: no gate to skip); complete it
 * `neutral`, naming who and why. Answers what the check run now shows.
 */
export async function skipGate(
  deps: GateDeps,
  ref: { orgId: string; repoFullName: string; prNumber: number },
  skip: { by: string; reason: string },
): Promise<{ sha: string; conclusion?: string; title: string }> {
  const env = await findEnvironment(ref.orgId, keys.environments.envKey(ref.repoFullName, ref.prNumber));
  if (!env || env.status === 'torn_down') throw new NotFoundError('environment not found');
  const head = env.inputs?.headSha?.toLowerCase();
  const record = head ? await gateRecord(env, head) : undefined;
  if (!head || !record)
    throw new ConflictError(
      "the pull request's head has no check run to skip (its application has no run_on_preview tests, or no deploy of it was requested)",
    );
  await reopen(record, { end: { kind: 'skipped', by: skip.by, reason: skip.reason } });
  const reopened = await gateRecord(env, head);
  const done = reopened ? await bring(deps, reopened) : record;
  return {
    sha: head,
    ...(done.conclusion ? { conclusion: done.conclusion } : {}),
    title: `Skipped by ${skip.by}: ${skip.reason}`,
  };
}

/** Set what ends the story, and let it be shown again (a completed story included). */
async function reopen(record: GateRecord, set: Pick<GateRecord, 'end'>): Promise<void> {
  await ddb().send(
    new UpdateCommand({
      TableName: table('tenancy'),
      Key: { pk: record.pk },
      UpdateExpression: 'SET #end = :end, #state = :state ADD gen :one REMOVE shown',
      ExpressionAttributeNames: { '#end': 'end', '#state': 'state' },
      ExpressionAttributeValues: { ':end': set.end, ':state': 'in_progress', ':one': 1 },
    }),
  );
}
