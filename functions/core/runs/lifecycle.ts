import { PutCommand, QueryCommand, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { idFrom, newId } from '../../shared/crypto.js';
import { log } from '../../shared/log.js';
import type { Environment } from '../environments/index.js';
import { copyStep, findTest } from '../test-definitions/index.js';
import {
  loadRun,
  type RunAttemptItem,
  type RunItem,
  type RunStatus,
  type RunStepItem,
  type RunTarget,
  type RunWake,
  runKey,
  statusWrite,
} from './store.js';
import { resolveTarget } from './target.js';

/** One conditional write of a run: `update` with the runs table and the run's key filled in. */
function updateRun(runId: string, update: Omit<UpdateCommandInput, 'TableName' | 'Key'>) {
  return ddb().send(new UpdateCommand({ TableName: table('runs'), Key: runKey(runId), ...update }));
}

/*
 * A run's lifecycle, every write of it: start (POST /test/{test_id}/run, and a ready environment's preview
 * runs), prepare (the first state of `testRun`), each step's outcome, finish, and fail (from any state
 * that ends a run early). Claims and recovery build on these: execution/claims.ts, recovery.ts.
 */

/**
 * The saved variables with overrides applied: a name the test does not save is ignored, a saved name's
 * value is replaced. Own properties only: `constructor` or `toString` is an ordinary name (it overrides a
 * saved variable of that name and nothing else), and an inherited member matches nothing. The result has
 * a null prototype (the key rule is in shared/validation.ts).
 */
export function resolveVariables(
  saved: Record<string, string>,
  overrides: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(saved))
    out[name] = Object.hasOwn(overrides, name) ? (overrides[name] as string) : value;
  return out;
}

export interface StartRunInput {
  applicationVersionId?: string;
  /** @default 'api' */
  source?: string;
  /** Overrides of the test's saved variables, by name. */
  runtimeMetadata?: Record<string, string>;
  /** The merge gate's record this run belongs to (core/gate/), which its end brings up to date. */
  gateKey?: string;
  /**
   * The run's id, when the caller derives it (`idFrom`) to make the start idempotent: a run of that id
   * already stored is not started again, and its id is returned as if it had just started.
   */
  runId?: string;
}

/** Execution name of a run's state machine: unique per start, readable in the console. */
const executionName = (runId: string) => `run-${runId}-${newId()}`.slice(0, 80);

/**
 * Start a run of a test (POST /test/{test_id}/run).
 * Steps: load the test (404 if absent or another org's); resolve its variables with the overrides; put a
 * `pending` run holding copies of the test's steps, its application and timeouts, and every index key;
 * start the `testRun` state machine, which resolves the target and runs the steps in a browser. When the
 * state machine cannot be started, the run ends `failed` saying so (it is created all the same: no run
 * stays `pending`).
 * @returns the new run's id
 */
export async function startRun(
  deps: { workflows: Workflows },
  orgId: string,
  testId: string,
  input: StartRunInput = {},
): Promise<string> {
  const test = await findTest(orgId, testId);
  const runId = input.runId ?? newId();
  const createdAt = new Date().toISOString();
  const status: RunStatus = 'pending';
  const run: RunItem = {
    runId,
    orgId,
    testId,
    name: test.name,
    status,
    createdAt,
    folder: { id: test.folder.id, name: test.folder.name },
    source: input.source ?? 'api',
    ...(input.applicationVersionId !== undefined ? { applicationVersionId: input.applicationVersionId } : {}),
    ...(input.gateKey !== undefined ? { gateKey: input.gateKey } : {}),
    ...(test.applicationId !== undefined ? { applicationId: test.applicationId } : {}),
    applicationVersion: { name: test.applicationVersion.name, path: test.applicationVersion.path },
    ...(test.stepTimeoutSeconds !== undefined ? { stepTimeoutSeconds: test.stepTimeoutSeconds } : {}),
    ...(test.runTimeoutSeconds !== undefined ? { runTimeoutSeconds: test.runTimeoutSeconds } : {}),
    ...(test.retries ? { retries: test.retries } : {}),
    ...(test.heal === false ? { heal: false as const } : {}),
    ...(test.scenario ? { scenario: test.scenario } : {}),
    variables: resolveVariables(test.variables ?? {}, input.runtimeMetadata ?? {}),
    ...(test.secretVariables?.length ? { secretVariables: test.secretVariables } : {}),
    steps: test.steps.map((s) => ({ ...copyStep(s), output: '', status })),
    ...keys.runs.indexKeys({ orgId, runId, testId, folderId: test.folder.id, status, createdAt }),
  };
  try {
    await ddb().send(
      new PutCommand({
        TableName: table('runs'),
        // A Map, so a variable named `constructor` is stored as data (see shared/validation.ts).
        Item: { ...run, variables: new Map(Object.entries(run.variables)) },
        ConditionExpression: 'attribute_not_exists(runId)',
      }),
    );
  } catch (err) {
    // A derived id already stored: this start was made before (a retried task). Not started twice.
    if (input.runId === undefined || !isConditionFailure(err)) throw err;
    log.info('the run was started before', { runId, testId });
    return runId;
  }
  try {
    await deps.workflows.start('testRun', { runId }, executionName(runId));
  } catch (err) {
    log.error('could not start a test run', { runId, error: (err as Error).name });
    await failRun(runId, `the run could not be started: ${(err as Error).message}`.slice(0, 1000));
  }
  return runId;
}

/**
 * End a run `failed` with `error`, unless it already ended (or, with `attempt`, unless another execution
 * owns it): its steps that never ran become `skipped`. Returns whether this call ended it.
 */
export async function failRun(
  runId: string,
  error: string,
  opts: { attempt?: string } = {},
): Promise<boolean> {
  const run = await loadRun(runId);
  if (!run || (run.status !== 'pending' && run.status !== 'running')) return false;
  if (opts.attempt !== undefined && run.attempt !== opts.attempt) return false;
  const steps = run.steps.map((s) => (s.status === 'pending' ? { ...s, status: 'skipped' as const } : s));
  const failed = statusWrite(run, 'failed');
  try {
    await updateRun(runId, {
      UpdateExpression: `SET ${failed.set}, endedAt = :now, #error = :error, steps = :steps`,
      ConditionExpression:
        opts.attempt !== undefined ? '#status = :was AND attempt = :attempt' : '#status = :was',
      ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
      ExpressionAttributeValues: {
        ...failed.values,
        ':now': new Date().toISOString(),
        ':error': error.slice(0, 2000),
        ':steps': steps,
        ':was': run.status,
        ...(opts.attempt !== undefined ? { ':attempt': opts.attempt } : {}),
      },
    });
    return true;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // Moved on meanwhile (pending → running, or ended): judge again against what is there now.
    return failRun(runId, error, opts);
  }
}

/** What Prepare hands Execute: the run is `running` under `attempt`, against `target`. */
export type PreparedRun = { ready: true; attempt: string; target: RunTarget } | { ready: false };

/** What `execution`'s own Prepare handed over, when the run is `running` under the attempt it set. */
function preparedBy(run: RunItem | undefined, execution: string | undefined): PreparedRun | undefined {
  if (run?.status === 'running' && execution && run.preparedBy === execution && run.attempt && run.target)
    return { ready: true, attempt: run.attempt, target: run.target };
  return undefined;
}

/**
 * First state of `testRun`. Steps: load the run; a run `running` under an attempt this very execution
 * (`execution`, its name) prepared is a retry of this step whose write landed (Step Functions retries a
 * Lambda task): the same attempt and target again; a run otherwise no longer pending was ended
 * meanwhile: nothing to do; resolve its target; when that fails, end the run `failed` with the reason;
 * otherwise move it to `running` under a fresh attempt id, recording the execution and the target (a
 * conditional write: one execution runs a run).
 */
export async function prepareRun(runId: string, opts: { execution?: string } = {}): Promise<PreparedRun> {
  const run = await loadRun(runId);
  const retried = preparedBy(run, opts.execution);
  if (retried) return retried;
  if (run?.status !== 'pending') return { ready: false };
  const resolved = await resolveTarget(run);
  if ('error' in resolved) {
    await failRun(runId, resolved.error);
    return { ready: false };
  }
  const attempt = newId();
  const running = statusWrite(run, 'running');
  try {
    await updateRun(runId, {
      UpdateExpression:
        `SET ${running.set}, startedAt = :now, attempt = :attempt, targetUrl = :url, #target = :target` +
        (opts.execution ? ', preparedBy = :execution' : ''),
      ConditionExpression: '#status = :pending',
      ExpressionAttributeNames: { '#status': 'status', '#target': 'target' },
      ExpressionAttributeValues: {
        ...running.values,
        ':pending': 'pending',
        ':now': new Date().toISOString(),
        ':attempt': attempt,
        ':url': resolved.target.url,
        ':target': resolved.target,
        ...(opts.execution ? { ':execution': opts.execution } : {}),
      },
    });
  } catch (err) {
    // Another Prepare moved it first: this execution's own (a concurrent retry) hands over its attempt.
    if (!isConditionFailure(err)) throw err;
    return preparedBy(await loadRun(runId), opts.execution) ?? { ready: false };
  }
  return { ready: true, attempt, target: resolved.target };
}

/** Thrown when a write of an execution finds the run no longer its own (ended, or another attempt). */
export class RunNotOwned extends Error {
  override name = 'RunNotOwned';
}

/** Write one step's outcome, only while the run is `running` under `attempt`. */
export async function saveRunStep(
  runId: string,
  attempt: string,
  index: number,
  step: RunStepItem,
): Promise<void> {
  try {
    await updateRun(runId, {
      UpdateExpression: `SET steps[${index}] = :step`,
      ConditionExpression: '#status = :running AND attempt = :attempt',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':step': step, ':running': 'running', ':attempt': attempt },
    });
  } catch (err) {
    if (isConditionFailure(err)) throw new RunNotOwned(`run ${runId} is no longer run by attempt ${attempt}`);
    throw err;
  }
}

/** End a run `passed` or `failed` (only while `running` under `attempt`), with its steps and video. */
export async function finishRun(
  run: Pick<RunItem, 'runId' | 'orgId' | 'testId' | 'folder'>,
  attempt: string,
  outcome: {
    status: 'passed' | 'failed';
    steps: RunStepItem[];
    error?: string;
    videoKey?: string;
    traceKey?: string;
    /** Every attempt, and whether a later one passed after a failure. */
    attempts?: RunAttemptItem[];
    flaky?: boolean;
    /** How many of `steps` were healed (heal.ts); absent or 0: none. */
    healedSteps?: number;
    /** The origins refused to the page without failing a step (attempt.ts); absent or empty: none. */
    refusedOrigins?: string[];
    /** `environment`: the preview never answered, not a step failed (the merge gate tells them apart). */
    errorKind?: 'environment';
    /** The wait for the preview to wake, before the first step. */
    wake?: RunWake;
  },
): Promise<void> {
  const ended = statusWrite(run, outcome.status);
  const sets = [ended.set, 'endedAt = :now', 'steps = :steps'];
  const values: Record<string, unknown> = {
    ...ended.values,
    ':now': new Date().toISOString(),
    ':steps': outcome.steps,
    ':running': 'running',
    ':attempt': attempt,
  };
  if (outcome.error !== undefined) {
    sets.push('#error = :error');
    values[':error'] = outcome.error.slice(0, 2000);
  }
  if (outcome.videoKey !== undefined) {
    sets.push('videoKey = :video');
    values[':video'] = outcome.videoKey;
  }
  if (outcome.traceKey !== undefined) {
    sets.push('traceKey = :trace');
    values[':trace'] = outcome.traceKey;
  }
  if (outcome.attempts !== undefined) {
    sets.push('attempts = :attempts');
    values[':attempts'] = outcome.attempts;
  }
  if (outcome.flaky) {
    sets.push('flaky = :flaky', 'flakyKey = :flakyKey');
    values[':flaky'] = true;
    values[':flakyKey'] = keys.runs.flaky(run.orgId);
  }
  if (outcome.healedSteps) {
    sets.push('healedSteps = :healed', 'healedKey = :healedKey');
    values[':healed'] = outcome.healedSteps;
    values[':healedKey'] = keys.runs.healed(run.orgId);
  }
  if (outcome.refusedOrigins?.length) {
    sets.push('refusedOrigins = :refused');
    values[':refused'] = outcome.refusedOrigins;
  }
  if (outcome.errorKind) {
    sets.push('errorKind = :errorKind');
    values[':errorKind'] = outcome.errorKind;
  }
  if (outcome.wake) {
    sets.push('wake = :wake');
    values[':wake'] = outcome.wake;
  }
  try {
    await updateRun(run.runId, {
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: '#status = :running AND attempt = :attempt',
      ExpressionAttributeNames: {
        '#status': 'status',
        ...(outcome.error !== undefined ? { '#error': 'error' } : {}),
      },
      ExpressionAttributeValues: values,
    });
  } catch (err) {
    if (isConditionFailure(err))
      throw new RunNotOwned(`run ${run.runId} is no longer run by attempt ${attempt}`);
    throw err;
  }
}

/**
 * Start the `run_on_preview` tests of an environment's application(s) now that it is ready: for every
 * application of the environment's organization linked to its repository, each test in its `previewTestIds`
 * that still belongs to it and still runs on previews gets a run with `source: preview`, against this
 * environment (`application_version_id` = its `environmentId`). Best effort, never throws: failures are
 * logged (per test; the others still start). Returns the new run ids. `opts.gateKey`: the merge gate's
 * record the runs belong to; `opts.only`: run only these tests (a re-run of the failed ones);
 * `opts.startKey`: what makes this start once-only (MarkReady: the environment, its head and the deploy's
 * generation): each test's run id is derived from it, so a retried start finds the runs it started
 * before and returns their ids instead of starting a second set.
 */
export async function startPreviewRuns(
  deps: { workflows: Workflows },
  env: Pick<Environment, 'orgId' | 'repoFullName' | 'prNumber'> & { environmentId?: string },
  opts: { gateKey?: string; only?: ReadonlySet<string>; startKey?: string } = {},
): Promise<string[]> {
  let Items: Record<string, unknown>[] | undefined;
  try {
    ({ Items } = await ddb().send(
      new QueryCommand({
        TableName: table('applications'),
        IndexName: 'byRepo',
        KeyConditionExpression: 'repoKey = :k',
        ExpressionAttributeValues: { ':k': keys.applications.byRepo(env.orgId, env.repoFullName) },
      }),
    ));
  } catch (err) {
    // Best effort: a deploy never fails over its preview runs.
    log.error('could not look up preview runs', { repo: env.repoFullName, error: (err as Error).message });
    return [];
  }
  const runIds: string[] = [];
  for (const app of (Items ?? []) as { applicationId: string; previewTestIds?: Set<string> }[]) {
    for (const testId of [...(app.previewTestIds ?? [])].sort()) {
      try {
        const test = await findTest(env.orgId, testId).catch(() => undefined);
        if (!test?.runOnPreview || test.applicationId !== app.applicationId) continue;
        if (opts.only && !opts.only.has(testId)) continue;
        runIds.push(
          await startRun(deps, env.orgId, testId, {
            source: 'preview',
            ...(opts.gateKey ? { gateKey: opts.gateKey } : {}),
            ...(opts.startKey !== undefined
              ? { runId: idFrom(`preview-run:${env.orgId}:${opts.startKey}:${testId}`) }
              : {}),
            ...(env.environmentId ? { applicationVersionId: env.environmentId } : {}),
          }),
        );
      } catch (err) {
        log.error('could not start a preview run', { testId, error: (err as Error).message });
      }
    }
  }
  return runIds;
}

/** The cause of a caught `testRun` failure, as the run's error. Lambda wraps errors as JSON; local runs do not. */
export function runFailureMessage(failure: { Error?: string; Cause?: string } | undefined): string {
  if (failure?.Error === 'States.Timeout')
    return 'the run executor timed out (the state machine gives it 15 minutes)';
  const cause = failure?.Cause ?? '';
  let message = cause;
  try {
    const parsed = JSON.parse(cause) as { errorMessage?: string };
    if (parsed.errorMessage) message = parsed.errorMessage;
  } catch {
    // not JSON: the message itself
  }
  return `the run failed: ${message || failure?.Error || 'unknown failure'}`;
}
