import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import type {
  CheckRunConclusion,
  CheckRunStatus,
  CheckRunWrite,
  PrStatus,
} from '../../ports/pr-status/port.js';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { newId, sha256Hex } from '../../shared/crypto.js';
import { log } from '../../shared/log.js';
import { type Environment, findEnvironment, ownerTag } from '../environments/index.js';
import { loadRun } from '../runs/index.js';
import type { GateLinks } from './links.js';
import { holds, quarantinesOf } from './quarantine.js';
import { allEnded, conclusionOf, type GateEnd, type GateRun, renderOutput } from './story.js';

/*
 * The merge gate: one GitHub check run, `Preview tests`, per head commit of a pull request whose
 * application has `run_on_preview` tests. A reconciler, like the PR status: every place that moves the
 * story (a deploy requested, the preview ready or failed, a run ended, a teardown, a crash recovered)
 * calls `syncGate`, which reads what is stored (the environment, the gate record, its runs) and brings
 * the check run there: `queued` while the preview deploys, `in_progress` while its runs run, `completed`
 * once they ended or something else ended the story. A completed story is final until a re-run, or a
 * new deploy of the same head, opens a fresh one. Idempotent: a write GitHub already shows is not made again, so a task Step
 * Functions runs twice, or a redelivered webhook, changes nothing.
 */

export const CHECK_RUN_NAME = 'Preview tests';

/**
 * The `external_id` of a story's check run: whose it is (the organization's tag, a hash, never its id),
 * the environment (`owner/repo#pr`), the head commit and the story's number. Nothing secret. Two
 * organizations previewing one repository, and each re-run's story, get their own.
 */
export const externalIdOf = (r: Pick<GateRecord, 'orgId' | 'envKey' | 'sha' | 'story'>): string =>
  `${ownerTag(r.orgId)}:${r.envKey}@${r.sha}/${r.story}`;

/** The gate record of one head commit (table `tenancy`, key `keys.gates.checkRun`). */
export interface GateRecord {
  pk: string;
  orgId: string;
  envKey: string;
  repoFullName: string;
  prNumber: number;
  sha: string;
  /** The story's number on this head: 1, then one more per re-run or new deploy of the head. */
  story: number;
  checkRunId?: number;
  /** The runs of this story, once the preview is ready and they started. */
  runIds?: string[];
  /** Runs of an earlier story whose results this one keeps (re-run of the failed ones). */
  keptRunIds?: string[];
  /**
   * The deploy (the environment's generation) the story is of: set when the record opens and when a
   * deploy's runs are attached. A newer deploy of the same head tells its own runs (`attachRuns`).
   */
  generation?: number;
  state: CheckRunStatus;
  conclusion?: CheckRunConclusion;
  end?: GateEnd;
  /** A hash of the last write GitHub got (status, conclusion, output). */
  shown?: string;
  /** One more each time a request changes the story in place (a skip): a write worked out before is stale. */
  gen?: number;
  /** The sync creating or updating the check run now, and until when its claim holds (`bring`). */
  writer?: string;
  writerUntil?: number;
  createdAt: string;
  completedAt?: string;
}

export interface GateDeps {
  prStatus: Pick<PrStatus, 'createCheckRun' | 'findCheckRun' | 'updateCheckRun'> &
    Partial<Pick<PrStatus, 'reply'>>;
  /** The check run's links (details_url, reports, screenshots), when the service knows its public URL. */
  links?: GateLinks;
}

type EnvRef = Pick<Environment, 'orgId' | 'envKey'>;

export const getRecord = async (pk: string): Promise<GateRecord | undefined> =>
  (await ddb().send(new GetCommand({ TableName: table('tenancy'), Key: { pk }, ConsistentRead: true })))
    .Item as GateRecord | undefined;

/** The gate record of an environment's head commit, if any. */
export const gateRecord = (ref: EnvRef, sha: string) =>
  getRecord(keys.gates.checkRun(ref.orgId, ref.envKey, sha));

/** How many `run_on_preview` tests the applications linked to the environment's repository have. */
export async function previewTestCount(env: Pick<Environment, 'orgId' | 'repoFullName'>): Promise<number> {
  const { Items } = await ddb().send(
    new QueryCommand({
      TableName: table('applications'),
      IndexName: 'byRepo',
      KeyConditionExpression: 'repoKey = :k',
      ExpressionAttributeValues: { ':k': keys.applications.byRepo(env.orgId, env.repoFullName) },
    }),
  );
  return ((Items ?? []) as { previewTestIds?: Set<string> }[]).reduce(
    (n, a) => n + (a.previewTestIds?.size ?? 0),
    0,
  );
}

/** What the gate reads of a stored run. */
export async function gateRun(runId: string): Promise<GateRun | undefined> {
  const run = await loadRun(runId);
  if (!run) return undefined;
  const failedAt = run.steps.findIndex((s) => s.status === 'failed');
  const failed = failedAt >= 0 ? run.steps[failedAt] : undefined;
  return {
    runId,
    testId: run.testId,
    ...(run.applicationId ? { applicationId: run.applicationId } : {}),
    name: run.name,
    status: run.status,
    ...(run.startedAt ? { startedAt: run.startedAt } : {}),
    ...(run.endedAt ? { endedAt: run.endedAt } : {}),
    ...(run.error ? { error: run.error } : {}),
    retries: Math.max(0, (run.attempts?.length ?? 1) - 1),
    flaky: run.flaky === true,
    ...(run.errorKind === 'environment' ? { errorKind: 'environment' as const } : {}),
    ...(failed
      ? {
          failedStep: {
            number: failedAt + 1,
            interaction: failed.interaction,
            output: failed.output,
            ...(failed.imageKey ? { imageKey: failed.imageKey } : {}),
          },
        }
      : {}),
  };
}

/**
 * The runs a record's story tells: the kept results of an earlier story, then this story's runs; a run
 * of a test whose quarantine held when it ended (or holds now, while it runs) is marked quarantined.
 */
export async function storyRuns(record: GateRecord): Promise<GateRun[]> {
  const fresh = (await Promise.all((record.runIds ?? []).map(gateRun))).filter((r) => r !== undefined);
  const kept = (await Promise.all((record.keptRunIds ?? []).map(gateRun))).filter((r) => r !== undefined);
  const rerun = new Set(fresh.map((r) => r.testId));
  const runs = [...kept.filter((r) => !rerun.has(r.testId)), ...fresh];
  if (!runs.length) return runs;
  const quarantines = await quarantinesOf(
    record.orgId,
    runs.flatMap((r) => (r.applicationId ? [r.applicationId] : [])),
  );
  return runs.map((r) => {
    const entry = quarantines.get(r.testId);
    return holds(entry, r.endedAt ?? new Date())
      ? {
          ...r,
          quarantined: true,
          quarantine: { owner: entry!.owner, reason: entry!.reason, until: entry!.until },
        }
      : r;
  });
}

/**
 * The runs with their links: each run's report, a failed step's screenshot (the report at that step).
 * Best effort: a link that cannot be minted (the signing key unreadable) is left out and logged, and
 * the row shows the run's id.
 */
async function linked(runs: GateRun[], links: GateLinks): Promise<GateRun[]> {
  const attempt = async (what: string, make: () => Promise<string>) => {
    try {
      return await make();
    } catch (err) {
      log.warn('could not mint a merge gate link', { what, error: (err as Error).name });
      return undefined;
    }
  };
  return Promise.all(
    runs.map(async (r) => {
      const reportUrl = await attempt('report', () => links.report(r.runId));
      // The screenshot as the report shows it, at the failed step: one signed link, no media URL.
      const step = r.failedStep?.imageKey ? r.failedStep.number : undefined;
      const screenshot = reportUrl && step ? links.screenshot(reportUrl, step) : undefined;
      return {
        ...r,
        ...(reportUrl ? { reportUrl } : {}),
        ...(r.failedStep && screenshot ? { failedStep: { ...r.failedStep, screenshot } } : {}),
      };
    }),
  );
}

/** Where the story of a record is now: the check run's state, and what ended it. */
function desired(
  env: Environment | undefined,
  record: GateRecord,
  runs: GateRun[],
): { state: CheckRunStatus; end?: GateEnd } {
  if (record.end) return { state: 'completed', end: record.end };
  const current = env && (env.inputs?.headSha ?? '').toLowerCase() === record.sha;
  if (!env || env.status === 'torn_down' || (current && env.tornDownRequested))
    return { state: 'completed', end: { kind: 'closed' } };
  if (!current) {
    const newer = env.inputs?.headSha;
    return newer
      ? { state: 'completed', end: { kind: 'superseded', newerSha: newer } }
      : { state: 'completed', end: { kind: 'closed' } };
  }
  if (record.runIds !== undefined) return { state: allEnded(runs) ? 'completed' : 'in_progress' };
  if (env.status === 'failed')
    return { state: 'completed', end: { kind: 'preview-failed', error: env.error ?? 'unknown failure' } };
  return { state: env.status === 'ready' ? 'in_progress' : 'queued' };
}

/** How long a writer's claim on a record holds if it never lets go (a crash between claim and release). */
export const CLAIM_MS = 30_000;
/** How long a sync waits for another writer's claim before leaving the record to that writer. */
const CLAIM_WAIT_MS = 20_000;
const CLAIM_POLL_MS = 100;

/**
 * Claim the record's check run for one writer: creating it on GitHub, or updating it, is done by one
 * sync at a time. Conditioned on no live claim, so of two writers racing (two runs ending together,
 * a deploy request beside a webhook) one creates the head's check run and the other waits and then
 * brings it from what is stored, instead of creating a second.
 */
async function claim(pk: string, token: string): Promise<boolean> {
  const now = Date.now();
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('tenancy'),
        Key: { pk },
        UpdateExpression: 'SET writer = :token, writerUntil = :until',
        ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(writer) OR writerUntil < :now)',
        ExpressionAttributeValues: { ':token': token, ':until': now + CLAIM_MS, ':now': now },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

async function release(pk: string, token: string): Promise<void> {
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('tenancy'),
        Key: { pk },
        UpdateExpression: 'REMOVE writer, writerUntil',
        ConditionExpression: 'writer = :token',
        ExpressionAttributeValues: { ':token': token },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}

/** Final, or already what GitHub shows: nothing to write. */
const settled = (record: GateRecord) => record.state === 'completed' && record.checkRunId !== undefined;

/**
 * Bring one record's check run to what is stored. Steps: claim the record (another writer holds it:
 * wait for it to let go, then read the record again, which may now show what this sync would write);
 * holding it, read the record, the environment and the runs afresh; work out the state and what ended
 * it; build the write; when GitHub already shows it, stop; otherwise update the check run the record
 * names, or (none recorded) the story's one GitHub lists by its external_id (created by a writer that
 * died before recording it), or else create it, then record what was shown, conditioned on the claim, on the record not
 * having completed meanwhile (completed is final) and on its story and generation (a re-run or a skip
 * recorded meanwhile wins: the write is worked out again); let go of the claim.
 */
export async function bring(deps: GateDeps, record: GateRecord): Promise<GateRecord> {
  const deadline = Date.now() + CLAIM_WAIT_MS;
  const token = newId();
  for (;;) {
    if (settled(record)) return record;
    if (await claim(record.pk, token)) {
      try {
        return await write(deps, record.pk, token);
      } finally {
        await release(record.pk, token);
      }
    }
    if (Date.now() > deadline) {
      log.warn('the merge gate record stayed claimed by another writer', { pk: record.pk });
      return record;
    }
    await new Promise((r) => setTimeout(r, CLAIM_POLL_MS));
    record = (await getRecord(record.pk)) ?? record;
  }
}

/** Holding the claim: write what the stored story says, until the record shows it. */
async function write(deps: GateDeps, pk: string, token: string): Promise<GateRecord> {
  for (let attempt = 0; ; attempt++) {
    const record = await getRecord(pk);
    if (!record) throw new Error('the merge gate record is gone');
    if (settled(record)) return record;
    const env = await findEnvironment(record.orgId, record.envKey);
    const runs = await storyRuns(record);
    const { state, end } = desired(env, record, runs);
    const conclusion = state === 'completed' ? conclusionOf(runs, end) : undefined;
    // What GitHub is shown is judged without the links: they are signed afresh each time and expire.
    const plain = renderOutput(runs, end, state === 'completed');
    const output = deps.links
      ? renderOutput(await linked(runs, deps.links), end, state === 'completed')
      : plain;
    const detailsUrl = await deps.links?.details(record);
    const update: CheckRunWrite = {
      repoFullName: record.repoFullName,
      sha: record.sha,
      name: CHECK_RUN_NAME,
      status: state,
      ...(conclusion ? { conclusion } : {}),
      externalId: externalIdOf(record),
      output,
      ...(detailsUrl ? { detailsUrl } : {}),
      ...(conclusion === 'failure' && runs.some((r) => r.status === 'failed')
        ? {
            actions: [
              {
                label: 'Re-run failed tests',
                description: 'Run only the failed tests again',
                identifier: 'rerun-failed',
              },
            ],
          }
        : {}),
    };
    const shown = sha256Hex(JSON.stringify([state, conclusion, plain]));
    if (shown === record.shown && record.checkRunId !== undefined) return record;
    // No id recorded: a writer may have died after GitHub created the story's check run but before the
    // record stored its id. GitHub's own list finds it by external_id, and it is adopted, not doubled.
    let checkRunId = record.checkRunId ?? (await deps.prStatus.findCheckRun(update));
    if (checkRunId === undefined) checkRunId = await deps.prStatus.createCheckRun(update);
    else {
      if (record.checkRunId === undefined)
        log.info('adopted the check run an earlier writer created', { sha: record.sha, checkRunId });
      await deps.prStatus.updateCheckRun(checkRunId, update);
    }
    const now = new Date().toISOString();
    try {
      const { Attributes } = await ddb().send(
        new UpdateCommand({
          TableName: table('tenancy'),
          Key: { pk },
          UpdateExpression:
            'SET checkRunId = :id, #state = :state, shown = :shown' +
            (conclusion ? ', conclusion = :conclusion, completedAt = :now' : '') +
            (end ? ', #end = :end' : ''),
          ConditionExpression:
            'writer = :token AND story = :story AND #state <> :completed AND ' +
            (record.gen === undefined ? 'attribute_not_exists(gen)' : 'gen = :gen'),
          ExpressionAttributeNames: { '#state': 'state', ...(end ? { '#end': 'end' } : {}) },
          ExpressionAttributeValues: {
            ':id': checkRunId,
            ':state': state,
            ':shown': shown,
            ':story': record.story,
            ':completed': 'completed',
            ':token': token,
            ...(record.gen === undefined ? {} : { ':gen': record.gen }),
            ...(conclusion ? { ':conclusion': conclusion, ':now': now } : {}),
            ...(end ? { ':end': end } : {}),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      if (state === 'completed')
        log.info('check run completed', {
          repo: record.repoFullName,
          sha: record.sha,
          conclusion,
          checkRunId,
        });
      return Attributes as GateRecord;
    } catch (err) {
      if (!isConditionFailure(err) || attempt >= 3) throw err;
      // A re-run, a skip or a newer story was recorded meanwhile: what GitHub shows is worked out again.
    }
  }
}

/** A new record (a head commit's first story), or the one a racing writer put first. */
async function openRecord(env: Environment, sha: string): Promise<GateRecord> {
  const record: GateRecord = {
    pk: keys.gates.checkRun(env.orgId, env.envKey, sha),
    orgId: env.orgId,
    envKey: env.envKey,
    repoFullName: env.repoFullName,
    prNumber: env.prNumber,
    sha: sha.toLowerCase(),
    story: 1,
    generation: env.generation,
    state: 'queued',
    createdAt: new Date().toISOString(),
  };
  try {
    await ddb().send(
      new PutCommand({
        TableName: table('tenancy'),
        Item: record,
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    return record;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    return (await getRecord(record.pk)) ?? record;
  }
}

export type GateOutcome = 'none' | CheckRunStatus;

/**
 * Bring an environment's gate to what is stored. Steps: read the environment (none, or the main
 * branch's: no gate); read the pull request's pointer: a different head it names is completed first
 * (`cancelled`, superseded by this one) and the pointer moves here; read this head's record, or open one
 * when the application has `run_on_preview` tests (else: no check run); bring it. Best effort: a failure
 * is logged and never thrown, so no step fails over the gate; the next sync tries again.
 */
export async function syncGate(deps: GateDeps, ref: EnvRef): Promise<GateOutcome> {
  try {
    const env = await findEnvironment(ref.orgId, ref.envKey);
    if (!env || env.prNumber <= 0) return 'none';
    const sha = env.inputs?.headSha?.toLowerCase();
    if (!sha) return 'none';
    const pointerKey = keys.gates.pullRequest(env.orgId, env.envKey);
    const pointer = await getRecord(pointerKey);
    const previous = (pointer as { sha?: string } | undefined)?.sha;
    if (previous && previous !== sha) {
      const old = await gateRecord(env, previous);
      if (old) await bring(deps, old);
    }
    if (previous !== sha)
      await ddb().send(new PutCommand({ TableName: table('tenancy'), Item: { pk: pointerKey, sha } }));
    let record = await gateRecord(env, sha);
    if (!record) {
      if ((await previewTestCount(env)) === 0) return 'none';
      record = await openRecord(env, sha);
    }
    return (await bring(deps, record)).state;
  } catch (err) {
    log.warn('could not bring the merge gate up to date', {
      envKey: ref.envKey,
      error: (err as Error).name,
      reason: (err as Error).message?.slice(0, 300),
    });
    return 'none';
  }
}

/**
 * The preview is ready and its `run_on_preview` runs started: record them as this story's runs, then
 * bring the gate. Only while the story has none (a retried task, or a re-run's story that has its own,
 * keeps them), unless they are of a newer deploy of the same head (a redeploy, or the head pushed
 * again): the gate then tells the runs of the deploy the pull request now has. A story still open takes
 * them in place (its check run, the old deploy's runs and kept results dropped); a completed one (a
 * failed preview, a passed or failed story, a skip) is final, so a fresh story opens for them.
 */
export async function attachRuns(deps: GateDeps, env: Environment, runIds: string[]): Promise<GateOutcome> {
  const sha = env.inputs?.headSha?.toLowerCase();
  if (env.prNumber <= 0 || !sha) return 'none';
  try {
    let record = await gateRecord(env, sha);
    if (!record) {
      if ((await previewTestCount(env)) === 0) return 'none';
      record = await openRecord(env, sha);
    }
    const redeployed = record.generation !== undefined && env.generation > record.generation;
    if (redeployed && record.state === 'completed' && (await nextStory(record, undefined)))
      log.info('a new deploy of the head opened a fresh merge gate story', { sha, story: record.story + 1 });
    await ddb().send(
      new UpdateCommand({
        TableName: table('tenancy'),
        Key: { pk: record.pk },
        UpdateExpression: `SET runIds = :ids, generation = :gen${redeployed ? ' REMOVE keptRunIds' : ''}`,
        ConditionExpression: '#state <> :completed AND (attribute_not_exists(runIds) OR generation < :gen)',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':ids': runIds, ':gen': env.generation, ':completed': 'completed' },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err))
      log.warn('could not record the runs of the merge gate', {
        envKey: env.envKey,
        error: (err as Error).name,
      });
  }
  return syncGate(deps, env);
}

/** Open the next story on the record: a new check run, no runs yet, `kept` results carried over. */
export async function nextStory(record: GateRecord, kept: string[] | undefined): Promise<boolean> {
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('tenancy'),
        Key: { pk: record.pk },
        UpdateExpression:
          'SET story = :next, #state = :queued' +
          (kept ? ', keptRunIds = :kept' : '') +
          ' REMOVE checkRunId, runIds, conclusion, #end, shown, completedAt' +
          (kept ? '' : ', keptRunIds'),
        ConditionExpression: 'story = :story',
        ExpressionAttributeNames: { '#state': 'state', '#end': 'end' },
        ExpressionAttributeValues: {
          ':next': record.story + 1,
          ':story': record.story,
          ':queued': 'queued',
          ...(kept ? { ':kept': kept } : {}),
        },
      }),
    );
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/** A run ended (passed, failed, or failed by a sweep or a recovery): bring the gate it belongs to. */
export async function syncGateOfRun(deps: GateDeps, runId: string): Promise<GateOutcome> {
  try {
    const run = await loadRun(runId);
    const gate = run?.gateKey;
    if (!gate) return 'none';
    const record = await getRecord(gate);
    if (!record) return 'none';
    if (record.state === 'completed') return 'completed';
    return (await bring(deps, record)).state;
  } catch (err) {
    log.warn('could not bring the merge gate up to date', { runId, error: (err as Error).name });
    return 'none';
  }
}

/** The gate record key of an environment's head commit (what its preview runs carry), if it has one. */
export const gateKeyOf = (
  env: Pick<Environment, 'orgId' | 'envKey' | 'prNumber' | 'inputs'>,
): string | undefined =>
  env.prNumber > 0 && env.inputs?.headSha
    ? keys.gates.checkRun(env.orgId, env.envKey, env.inputs.headSha)
    : undefined;
