import { timingSafeEqual } from 'node:crypto';
import { BatchGetCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys, repoKey } from '../manifest/tables.js';
import type { Workflows } from '../ports/workflows/port.js';
import { config } from '../shared/config.js';
import { newId, sha256Hex } from '../shared/crypto.js';
import { ddb, isConditionFailure, table } from '../shared/dynamo.js';
import { NotFoundError, ValidationError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { runOrigins } from '../shared/origins.js';
import { type AccessMode, type AccessSettings, effectiveAccess } from './access.js';
import type { Environment } from './environments.js';
import { type FactoryLocation, readScenarioState, type ScenarioRef, scenarioMetadata } from './scenarios.js';
import { type ApplicationVersion, copyStep, type Folder, findTest, type StepElement } from './tests.js';

export const RUN_STATUSES = ['pending', 'running', 'passed', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** A step's status: `skipped` for every step after the first failure (or all, when the run never ran). */
export type StepStatus = 'pending' | 'passed' | 'failed' | 'skipped';

/** A step of a run as stored: a copy of the test's step (same id) plus its outcome. */
export interface RunStepItem {
  id: string;
  instruction: string;
  interaction: string;
  /** The recorded URL until the step runs; then the page's URL after the step. */
  url: string;
  element: StepElement;
  output: string;
  status: StepStatus;
  /** Storage key of the step's screenshot (media store), once taken. */
  imageKey?: string;
}

/**
 * A run as stored (table `runs`, key `runId`). `variables` are the test's saved variables with this run's
 * overrides applied: internal, never in a response. The `*Key` attributes feed the listing GSIs
 * (`keys.runs.indexKeys`); every write of `status` writes its three status keys too.
 */
export interface RunItem {
  runId: string;
  orgId: string;
  testId: string;
  /** The test's name when the run started. */
  name: string;
  status: RunStatus;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  /** Why the run failed (a target that could not be resolved, a step, a timeout, a crash). */
  error?: string;
  folder: Folder;
  source: string;
  applicationVersionId?: string;
  /** Copied from the test when the run started: what the run targets, and its timeouts. */
  applicationId?: string;
  applicationVersion?: ApplicationVersion;
  stepTimeoutSeconds?: number;
  runTimeoutSeconds?: number;
  /** The first page the run opened (resolved by Prepare). */
  targetUrl?: string;
  /** Set when the run starts executing: every later write of that execution is conditioned on it. */
  attempt?: string;
  /**
   * The Step Functions execution whose Prepare set `attempt`, and the target it resolved: a retry of that
   * Prepare whose first write landed hands Execute the same attempt (issue 24).
   */
  preparedBy?: string;
  target?: RunTarget;
  variables: Record<string, string>;
  steps: RunStepItem[];
  /** Storage key of the run's video (media store), once stored. */
  videoKey?: string;
  /** The test's scenario when the run started (issue 12), and what its provisioning did. */
  scenario?: ScenarioRef;
  scenarioState?: unknown;
  /** `<createdAt>#<runId>`: the sort key of every index (newest first when read backwards). */
  createdKey: string;
  testKey: string;
  folderKey: string;
  statusKey: string;
  /** Absent on runs stored before issue 14 until backfilled (the local server does at start). */
  testStatusKey?: string;
  folderStatusKey?: string;
}

export interface RunStepView {
  id: string;
  instruction: string;
  interaction: string;
  output: string;
  status: StepStatus;
  url: string;
  element: StepElement;
  image: string | null;
}

/** What callers see (TestRun). `error` is additive: present only on a failed run that has one. */
export interface TestRunView {
  id: string;
  name: string;
  test_id: string;
  status: RunStatus;
  created_at: string;
  ended_at: string | null;
  folder_run_id: string | null;
  job_run_id: string | null;
  job_id: string | null;
  folder: Folder;
  video_url: string | null;
  metadata: { source: string; application_version_id?: string } & Record<string, unknown>;
  error?: string;
  steps?: RunStepView[];
}

/** What to include in a TestRun: media URLs (`media=true`) and steps (`steps=true`). */
export interface RunView {
  media: boolean;
  steps: boolean;
}

/** Turns a stored media key into its URL (already minted: see `MediaUrls`). */
export type MediaSigner = (key: string) => string | null;
const noMedia: MediaSigner = () => null;
/** Mints a URL for a stored media key, valid one hour from now (MediaStore.url). */
export type MediaUrls = (key: string) => Promise<string>;

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
}

const runKey = (runId: string) => ({ runId });

/** The status keys of a run moving to `status`, as `:statusKey`, `:testStatusKey`, `:folderStatusKey`. */
function statusKeyValues(run: Pick<RunItem, 'orgId' | 'testId' | 'folder'>, status: RunStatus) {
  const k = keys.runs.statusKeys({ orgId: run.orgId, testId: run.testId, folderId: run.folder.id, status });
  return {
    ':statusKey': k.statusKey,
    ':testStatusKey': k.testStatusKey,
    ':folderStatusKey': k.folderStatusKey,
  };
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
  const runId = newId();
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
    ...(test.applicationId !== undefined ? { applicationId: test.applicationId } : {}),
    applicationVersion: { name: test.applicationVersion.name, path: test.applicationVersion.path },
    ...(test.stepTimeoutSeconds !== undefined ? { stepTimeoutSeconds: test.stepTimeoutSeconds } : {}),
    ...(test.runTimeoutSeconds !== undefined ? { runTimeoutSeconds: test.runTimeoutSeconds } : {}),
    ...(test.scenario ? { scenario: test.scenario } : {}),
    variables: resolveVariables(test.variables ?? {}, input.runtimeMetadata ?? {}),
    steps: test.steps.map((s) => ({ ...copyStep(s), output: '', status })),
    ...keys.runs.indexKeys({ orgId, runId, testId, folderId: test.folder.id, status, createdAt }),
  };
  await ddb().send(
    new PutCommand({
      TableName: table('runs'),
      // A Map, so a variable named `constructor` is stored as data (see shared/validation.ts).
      Item: { ...run, variables: new Map(Object.entries(run.variables)) },
      ConditionExpression: 'attribute_not_exists(runId)',
    }),
  );
  try {
    await deps.workflows.start('testRun', { runId }, executionName(runId));
  } catch (err) {
    log.error('could not start a test run', { runId, error: (err as Error).name });
    await failRun(runId, `the run could not be started: ${(err as Error).message}`.slice(0, 1000));
  }
  return runId;
}

/** The stored run (any org), or undefined. */
export async function loadRun(runId: string): Promise<RunItem | undefined> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('runs'), Key: runKey(runId), ConsistentRead: true }),
  );
  if (!Item) return undefined;
  // Variables come back as a plain object; give them a null prototype like every other copy.
  const run = Item as RunItem;
  run.variables = Object.assign(Object.create(null), run.variables ?? {});
  return run;
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
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('runs'),
        Key: runKey(runId),
        UpdateExpression:
          'SET #status = :failed, statusKey = :statusKey, testStatusKey = :testStatusKey, ' +
          'folderStatusKey = :folderStatusKey, endedAt = :now, #error = :error, steps = :steps',
        ConditionExpression:
          opts.attempt !== undefined ? '#status = :was AND attempt = :attempt' : '#status = :was',
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
        ExpressionAttributeValues: {
          ':failed': 'failed',
          ...statusKeyValues(run, 'failed'),
          ':now': new Date().toISOString(),
          ':error': error.slice(0, 2000),
          ':steps': steps,
          ':was': run.status,
          ...(opts.attempt !== undefined ? { ':attempt': opts.attempt } : {}),
        },
      }),
    );
    return true;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // Moved on meanwhile (pending → running, or ended): judge again against what is there now.
    return failRun(runId, error, opts);
  }
}

/** Where a run goes: the first page, and what the executor needs to mask secrets. */
export interface RunTarget {
  /** The first page: the app's URL plus `application_version.path`. */
  url: string;
  /** The app's URL (relative `navigate` URLs resolve against it). */
  appUrl: string;
  applicationId: string;
  environmentId?: string;
  /** Every app of the environment (their secret bundles are masked in outputs). */
  apps: string[];
  /** Every app's URL in the environment, and the Environment Factory (preview.yaml, else the application). */
  urls?: Record<string, string>;
  factory?: FactoryLocation;
  /**
   * The origins the run's browser may load (issue 23): the app URLs' and the application's
   * `allowedOrigins` (`shared/origins.ts`, `runOrigins`).
   */
  origins?: string[];
  /** The environment's key, and whether its application protects it (issue 29: core/access.ts). */
  envKey?: string;
  access?: AccessMode;
}

/** The app URL plus a path, as written (`/form` → `http://host:port/form`). */
export function joinAppUrl(appUrl: string, path: string): string {
  if (!path) return appUrl;
  return `${appUrl.replace(/\/+$/, '')}${path.startsWith('/') ? '' : '/'}${path}`;
}

/** The org's environment of `repoFullName` whose `environmentId` is `environmentId`, if any. */
async function findEnvironmentById(
  orgId: string,
  repoFullName: string,
  environmentId: string,
): Promise<Environment | undefined> {
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await ddb().send(
      new QueryCommand({
        TableName: table('environments'),
        KeyConditionExpression: 'orgId = :org',
        FilterExpression: 'environmentId = :id',
        ExpressionAttributeValues: { ':org': orgId, ':id': environmentId },
        ConsistentRead: true,
        ExclusiveStartKey,
      }),
    );
    for (const env of (page.Items ?? []) as Environment[])
      if (repoKey(env.repoFullName) === repoKey(repoFullName)) return env;
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
  return undefined;
}

/**
 * Resolve what a run runs against (issue 11, decision 1): the test's application; the environment the
 * run's `application_version_id` names (an `environmentId` of that application), or else the
 * application's main-branch environment (0); it must be `ready`; the app named by
 * `application_version.name` in its `urls`, plus `application_version.path`. Otherwise the error says
 * which of these is missing.
 */
export async function resolveTarget(run: RunItem): Promise<{ target: RunTarget } | { error: string }> {
  const applicationId = run.applicationId;
  if (!applicationId)
    return {
      error:
        'the test has no application: set application_id in the tests file, or import it with ' +
        '`previewctl tests import --app ID`',
    };
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('applications'), Key: { applicationId }, ConsistentRead: true }),
  );
  const app = Item as
    | ({
        orgId: string;
        repoFullName?: string;
        disabled?: boolean;
        factoryApp?: string;
        factoryPath?: string;
        allowedOrigins?: string[];
      } & AccessSettings)
    | undefined;
  if (!app || app.orgId !== run.orgId) return { error: `application ${applicationId} not found` };
  if (!app.repoFullName)
    return { error: `application ${applicationId} is not linked to a repository, so it has no environments` };
  let env: Environment | undefined;
  let label: string;
  if (run.applicationVersionId !== undefined) {
    label = `environment ${run.applicationVersionId}`;
    env = await findEnvironmentById(run.orgId, app.repoFullName, run.applicationVersionId);
    if (!env) return { error: `no environment ${run.applicationVersionId} of application ${applicationId}` };
  } else {
    label = `the main-branch environment (0) of application ${applicationId}`;
    const { Item: envItem } = await ddb().send(
      new GetCommand({
        TableName: table('environments'),
        Key: { orgId: run.orgId, envKey: keys.environments.envKey(app.repoFullName, 0) },
        ConsistentRead: true,
      }),
    );
    env = envItem as Environment | undefined;
    if (!env || env.status === 'torn_down')
      return {
        error:
          `application ${applicationId} has no main-branch environment (0): deploy it, or name an ` +
          'environment with application_version_id',
      };
  }
  if (env.status !== 'ready' || env.tornDownRequested)
    return {
      error: `${label} is not ready (status ${env.tornDownRequested ? 'tearing down' : env.status})`,
    };
  const appName = run.applicationVersion?.name ?? '';
  const appUrl = env.urls?.[appName];
  if (!appUrl) {
    const apps = Object.keys(env.urls ?? {}).sort();
    return {
      error: `${label} has no app "${appName}" (its apps: ${apps.length ? apps.join(', ') : 'none'})`,
    };
  }
  return {
    target: {
      url: joinAppUrl(appUrl, run.applicationVersion?.path ?? ''),
      appUrl,
      applicationId,
      ...(env.environmentId ? { environmentId: env.environmentId } : {}),
      apps: Object.keys(env.urls ?? {}).sort(),
      urls: { ...env.urls },
      origins: runOrigins(Object.values(env.urls ?? {}), app.allowedOrigins ?? []),
      envKey: env.envKey,
      access: effectiveAccess(app, config().mode),
      ...(env.factory
        ? { factory: env.factory }
        : app.factoryApp
          ? { factory: { app: app.factoryApp, path: app.factoryPath ?? '/' } }
          : {}),
    },
  };
}

/** What Prepare hands Execute: the run is `running` under `attempt`, against `target`. */
export type PreparedRun = { ready: true; attempt: string; target: RunTarget } | { ready: false };

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
  if (
    run?.status === 'running' &&
    opts.execution &&
    run.preparedBy === opts.execution &&
    run.attempt &&
    run.target
  )
    return { ready: true, attempt: run.attempt, target: run.target };
  if (run?.status !== 'pending') return { ready: false };
  const resolved = await resolveTarget(run);
  if ('error' in resolved) {
    await failRun(runId, resolved.error);
    return { ready: false };
  }
  const attempt = newId();
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('runs'),
        Key: runKey(runId),
        UpdateExpression:
          'SET #status = :running, statusKey = :statusKey, testStatusKey = :testStatusKey, ' +
          'folderStatusKey = :folderStatusKey, startedAt = :now, attempt = :attempt, targetUrl = :url, ' +
          '#target = :target' +
          (opts.execution ? ', preparedBy = :execution' : ''),
        ConditionExpression: '#status = :pending',
        ExpressionAttributeNames: { '#status': 'status', '#target': 'target' },
        ExpressionAttributeValues: {
          ':running': 'running',
          ':pending': 'pending',
          ...statusKeyValues(run, 'running'),
          ':now': new Date().toISOString(),
          ':attempt': attempt,
          ':url': resolved.target.url,
          ':target': resolved.target,
          ...(opts.execution ? { ':execution': opts.execution } : {}),
        },
      }),
    );
  } catch (err) {
    // Another Prepare moved it first: this execution's own (a concurrent retry) hands over its attempt.
    if (!isConditionFailure(err)) throw err;
    const now = await loadRun(runId);
    if (
      now?.status === 'running' &&
      opts.execution &&
      now.preparedBy === opts.execution &&
      now.attempt &&
      now.target
    )
      return { ready: true, attempt: now.attempt, target: now.target };
    return { ready: false };
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
    await ddb().send(
      new UpdateCommand({
        TableName: table('runs'),
        Key: runKey(runId),
        UpdateExpression: `SET steps[${index}] = :step`,
        ConditionExpression: '#status = :running AND attempt = :attempt',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':step': step, ':running': 'running', ':attempt': attempt },
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) throw new RunNotOwned(`run ${runId} is no longer run by attempt ${attempt}`);
    throw err;
  }
}

/** End a run `passed` or `failed` (only while `running` under `attempt`), with its steps and video. */
export async function finishRun(
  run: Pick<RunItem, 'runId' | 'orgId' | 'testId' | 'folder'>,
  attempt: string,
  outcome: { status: 'passed' | 'failed'; steps: RunStepItem[]; error?: string; videoKey?: string },
): Promise<void> {
  const sets = [
    '#status = :status',
    'statusKey = :statusKey',
    'testStatusKey = :testStatusKey',
    'folderStatusKey = :folderStatusKey',
    'endedAt = :now',
    'steps = :steps',
  ];
  const values: Record<string, unknown> = {
    ':status': outcome.status,
    ...statusKeyValues(run, outcome.status),
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
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('runs'),
        Key: runKey(run.runId),
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: '#status = :running AND attempt = :attempt',
        ExpressionAttributeNames: {
          '#status': 'status',
          ...(outcome.error !== undefined ? { '#error': 'error' } : {}),
        },
        ExpressionAttributeValues: values,
      }),
    );
  } catch (err) {
    if (isConditionFailure(err))
      throw new RunNotOwned(`run ${run.runId} is no longer run by attempt ${attempt}`);
    throw err;
  }
}

/** Media keys of a run: one screenshot per step, one video. */
export const mediaKeys = {
  step: (run: Pick<RunItem, 'orgId' | 'runId'>, index: number, stepId: string) =>
    `runs/${run.orgId}/${run.runId}/step-${String(index + 1).padStart(3, '0')}-${stepId}.png`,
  video: (run: Pick<RunItem, 'orgId' | 'runId'>, extension: string) =>
    `runs/${run.orgId}/${run.runId}/video.${extension}`,
};

/**
 * Start the `run_on_preview` tests of an environment's application(s) now that it is ready (issue 11,
 * decision 7): for every application of the environment's organization linked to its repository, each
 * test in its `previewTestIds` that still belongs to it and still runs on previews gets a run with
 * `source: preview`, against this environment (`application_version_id` = its `environmentId`). Best
 * effort, never throws: failures are logged (per test; the others still start). Returns the new run ids.
 */
export async function startPreviewRuns(
  deps: { workflows: Workflows },
  env: Pick<Environment, 'orgId' | 'repoFullName' | 'prNumber'> & { environmentId?: string },
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
        runIds.push(
          await startRun(deps, env.orgId, testId, {
            source: 'preview',
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

export function toTestRunView(run: ListedRun, view: RunView, sign: MediaSigner = noMedia): TestRunView {
  const media = (key: string | undefined) => (view.media && key ? sign(key) : null);
  return {
    id: run.runId,
    name: run.name,
    test_id: run.testId,
    status: run.status,
    created_at: run.createdAt,
    ended_at: run.endedAt ?? null,
    folder_run_id: null,
    job_run_id: null,
    job_id: null,
    folder: { id: run.folder.id, name: run.folder.name },
    video_url: media(run.videoKey),
    metadata: {
      source: run.source,
      ...(run.applicationVersionId !== undefined ? { application_version_id: run.applicationVersionId } : {}),
      ...scenarioMetadata(readScenarioState(run.scenarioState)),
    },
    ...(run.status === 'failed' && run.error ? { error: run.error } : {}),
    ...(view.steps
      ? {
          steps: (run.steps ?? []).map((s) => ({
            id: s.id,
            instruction: s.instruction,
            interaction: s.interaction,
            output: s.output,
            status: s.status,
            url: s.url,
            element: { html: s.element.html, selector: s.element.selector },
            image: media(s.imageKey),
          })),
        }
      : {}),
  };
}

/**
 * The URL of every media key of `runs` that the view shows, minted now (`media=true`; otherwise none):
 * a signer for `toTestRunView`.
 */
export async function mintMediaUrls(
  runs: ListedRun[],
  view: RunView,
  urls?: MediaUrls,
): Promise<MediaSigner> {
  if (!view.media || !urls) return noMedia;
  const minted = new Map<string, string>();
  for (const run of runs) {
    const wanted = [run.videoKey, ...(view.steps ? (run.steps ?? []).map((s) => s.imageKey) : [])];
    for (const key of wanted) if (key && !minted.has(key)) minted.set(key, await urls(key));
  }
  return (key) => minted.get(key) ?? null;
}

/** GET /run/{run_id}: one run of the caller's org (404 otherwise). */
export async function getRun(
  orgId: string,
  runId: string,
  view: RunView,
  urls?: MediaUrls,
): Promise<TestRunView> {
  const run = await loadRun(runId);
  if (!run || run.orgId !== orgId) throw new NotFoundError('run not found');
  return toTestRunView(run, view, await mintMediaUrls([run], view, urls));
}

export interface RunFilters {
  testId?: string;
  folderId?: string;
  status?: RunStatus;
}

/** The runs listing indexes GET /run skips and finds keys on (functions/manifest/tables.ts). */
export type RunIndexName =
  | 'listOrg'
  | 'listTest'
  | 'listFolder'
  | 'listStatus'
  | 'listTestStatus'
  | 'listFolderStatus';

/** The `page*` index beside each listing index: the same keys, carrying `RUN_LISTING` (a page's runs). */
const PAGE_INDEX = {
  listOrg: 'pageOrg',
  listTest: 'pageTest',
  listFolder: 'pageFolder',
  listStatus: 'pageStatus',
  listTestStatus: 'pageTestStatus',
  listFolderStatus: 'pageFolderStatus',
} as const satisfies Record<RunIndexName, string>;

/** Which index partition holds exactly the runs a filter asks for. */
export interface RunQueryPlan {
  indexName: RunIndexName;
  keyName: 'orgId' | 'testKey' | 'folderKey' | 'statusKey' | 'testStatusKey' | 'folderStatusKey';
  keyValue: string;
  /**
   * With both test and folder: the folder the test's runs must be in. A test never changes folder (tests
   * are immutable and a run copies its test's), so the test's partition is either all of the answer or
   * none of it; the first fetched run says which.
   */
  folderId?: string;
}

/**
 * The index whose partition is exactly the filtered set: (test, status), (folder, status), test, folder,
 * status, or the whole org. Test and folder together read the test's partition (see `folderId`).
 */
export function planRunQuery(orgId: string, filters: RunFilters): RunQueryPlan {
  const { testId, folderId, status } = filters;
  const folder = folderId !== undefined ? { folderId } : {};
  if (testId !== undefined && status !== undefined)
    return {
      indexName: 'listTestStatus',
      keyName: 'testStatusKey',
      keyValue: keys.runs.byTestStatus(orgId, testId, status),
      ...folder,
    };
  if (testId !== undefined)
    return {
      indexName: 'listTest',
      keyName: 'testKey',
      keyValue: keys.runs.byTest(orgId, testId),
      ...folder,
    };
  if (folderId !== undefined && status !== undefined)
    return {
      indexName: 'listFolderStatus',
      keyName: 'folderStatusKey',
      keyValue: keys.runs.byFolderStatus(orgId, folderId, status),
    };
  if (folderId !== undefined)
    return { indexName: 'listFolder', keyName: 'folderKey', keyValue: keys.runs.byFolder(orgId, folderId) };
  if (status !== undefined)
    return { indexName: 'listStatus', keyName: 'statusKey', keyValue: keys.runs.byStatus(orgId, status) };
  return { indexName: 'listOrg', keyName: 'orgId', keyValue: orgId };
}

/** Whether a run passes the filters (an absent filter passes everything). */
export function matchesFilters(run: Pick<RunItem, 'testId' | 'folder' | 'status'>, f: RunFilters): boolean {
  return (
    (f.testId === undefined || run.testId === f.testId) &&
    (f.folderId === undefined || run.folder.id === f.folderId) &&
    (f.status === undefined || run.status === f.status)
  );
}

/** Longest `createdKey` a cursor may carry (an ISO time, `#`, a run id). */
const MAX_CURSOR_KEY = 200;
const CURSOR_KEY_RE = /^\d{4}-\d\d-\d\dT[\d:.]+Z#[A-Za-z0-9_-]+$/;

/** What binds a cursor to the org and the filter it was issued for (not a secret: see `encodeRunCursor`). */
function cursorBinding(orgId: string, filters: RunFilters, createdKey: string): string {
  const f = [filters.testId ?? null, filters.folderId ?? null, filters.status ?? null];
  return sha256Hex(JSON.stringify(['run-cursor-1', orgId, ...f, createdKey])).slice(0, 32);
}

/**
 * The opaque cursor of GET /run: base64url of `{k, b}`, the `createdKey` of the last run of the page and a
 * digest binding it to the org and the filter. It only positions a read inside the partition the caller's
 * own org and filter select (the partition key never comes from the cursor), so a forged one can reach
 * nothing a caller could not list anyway; the digest makes a cursor of another org or filter, or an edited
 * one, a 400 instead of a silent jump.
 */
export function encodeRunCursor(orgId: string, filters: RunFilters, createdKey: string): string {
  return Buffer.from(
    JSON.stringify({ k: createdKey, b: cursorBinding(orgId, filters, createdKey) }),
  ).toString('base64url');
}

/** The `createdKey` a cursor resumes after, or a ValidationError (400) naming `cursor`. */
export function decodeRunCursor(orgId: string, filters: RunFilters, cursor: string): string {
  const invalid = new ValidationError(
    'invalid query: cursor: not a cursor of this listing (follow the Link header URL as it is)',
  );
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid;
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid;
  }
  const { k, b } = (parsed ?? {}) as { k?: unknown; b?: unknown };
  if (typeof k !== 'string' || typeof b !== 'string' || k.length > MAX_CURSOR_KEY || !CURSOR_KEY_RE.test(k))
    throw invalid;
  const want = Buffer.from(cursorBinding(orgId, filters, k));
  const got = Buffer.from(b);
  if (got.length !== want.length || !timingSafeEqual(got, want)) throw invalid;
  return k;
}

/** The run id at the end of a `createdKey` (`<created_at>#<id>`). */
const runIdOfCreatedKey = (createdKey: string) => createdKey.slice(createdKey.lastIndexOf('#') + 1);

/** Where a page starts: `offset` runs from the newest, or just after a cursor's run (not both). */
export type RunPageStart = { offset: number; cursor?: undefined } | { offset?: 0; cursor: string };

export interface RunPage {
  runs: TestRunView[];
  /** The cursor of the next page, when there is one. */
  next?: string;
}

/** A run as a page reads it: from a `page*` index (`RUN_LISTING`, no steps) or whole by id (`steps=true`). */
export type ListedRun = Omit<RunItem, 'steps' | 'variables'> & { steps?: RunStepItem[] };

/**
 * Skip `skip` runs of the plan's listing index from `start` (exclusive; the newest when absent), reading
 * keys only (`createdKey`). Returns the `createdKey` of the last run skipped, the start again when `skip`
 * is 0, and `null` when the partition holds fewer runs than that.
 */
async function skipRunKeys(plan: RunQueryPlan, skip: number, start: string | undefined) {
  let last = start;
  let skipped = 0;
  let startKey = indexStartKey(plan, start);
  while (skipped < skip) {
    const res = await ddb().send(
      new QueryCommand({
        TableName: table('runs'),
        IndexName: plan.indexName,
        KeyConditionExpression: '#k = :k',
        ProjectionExpression: 'createdKey',
        ExpressionAttributeNames: { '#k': plan.keyName },
        ExpressionAttributeValues: { ':k': plan.keyValue },
        ScanIndexForward: false,
        Limit: skip - skipped,
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of res.Items ?? []) last = String(item.createdKey);
    skipped += res.Items?.length ?? 0;
    startKey = res.LastEvaluatedKey;
    if (!startKey) break;
  }
  return skipped < skip ? null : last;
}

/** The index key of the run whose `createdKey` is given, in the plan's partition (a Query's start key). */
function indexStartKey(
  plan: RunQueryPlan,
  createdKey: string | undefined,
): Record<string, unknown> | undefined {
  return createdKey === undefined
    ? undefined
    : { runId: runIdOfCreatedKey(createdKey), createdKey, [plan.keyName]: plan.keyValue };
}

/**
 * The `limit + 1` newest entries of `indexName` in the plan's partition after `start` (the extra one says
 * whether a next page exists): their `createdKey` only (`keysOnly`), or all the index carries.
 */
async function queryRunIndex(
  plan: RunQueryPlan,
  indexName: string,
  limit: number,
  start: string | undefined,
  keysOnly: boolean,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let startKey = indexStartKey(plan, start);
  while (items.length <= limit) {
    const res = await ddb().send(
      new QueryCommand({
        TableName: table('runs'),
        IndexName: indexName,
        KeyConditionExpression: '#k = :k',
        ...(keysOnly ? { ProjectionExpression: 'createdKey' } : {}),
        ExpressionAttributeNames: { '#k': plan.keyName },
        ExpressionAttributeValues: { ':k': plan.keyValue },
        ScanIndexForward: false,
        Limit: limit + 1 - items.length,
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of res.Items ?? []) items.push(item);
    startKey = res.LastEvaluatedKey;
    if (!startKey) break;
  }
  return items;
}

/** Runs by id (BatchGetItem, at most 100 keys, unprocessed keys retried), `projection` of each if given. */
async function batchGetRuns(runIds: string[], projection?: string): Promise<Map<string, RunItem>> {
  const found = new Map<string, RunItem>();
  let request: Record<string, unknown>[] = runIds.map(runKey);
  while (request.length) {
    const res = await ddb().send(
      new BatchGetCommand({
        RequestItems: {
          [table('runs')]: { Keys: request, ...(projection ? { ProjectionExpression: projection } : {}) },
        },
      }),
    );
    for (const item of (res.Responses?.[table('runs')] ?? []) as RunItem[]) found.set(item.runId, item);
    request = (res.UnprocessedKeys?.[table('runs')]?.Keys ?? []) as Record<string, unknown>[];
  }
  return found;
}

/**
 * Read the runs of a page. `offset` runs are skipped on the plan's listing index reading keys only (or the
 * page starts just after a cursor's run). Then, without steps, the page is one Query of the `page*` index
 * beside it, which carries what the listing shows (`RUN_LISTING`), from that key: `limit + 1` entries, the
 * extra one saying whether a next page exists; the few runs with a scenario get their `scenarioState` by
 * id. With `steps=true` the page's keys are read the same way from the listing index and its runs whole by
 * id (BatchGetItem). Runs are checked against the org and the filters as read, and with test and folder a
 * first run in another folder means the test's runs are none of the answer.
 */
async function readRunPage(
  orgId: string,
  filters: RunFilters,
  plan: RunQueryPlan,
  limit: number,
  skip: number,
  after: string | undefined,
  withSteps: boolean,
): Promise<{ runs: ListedRun[]; lastKey?: string }> {
  const start = skip > 0 ? await skipRunKeys(plan, skip, after) : after;
  if (start === null) return { runs: [] };
  let page: ListedRun[];
  let more: boolean;
  let lastKey: string | undefined;
  if (withSteps) {
    const keys = await queryRunIndex(plan, plan.indexName, limit, start, true);
    more = keys.length > limit;
    const wanted = keys.slice(0, limit).map((k) => String(k.createdKey));
    lastKey = wanted[wanted.length - 1];
    const found = await batchGetRuns(wanted.map(runIdOfCreatedKey));
    page = wanted.flatMap((k) => found.get(runIdOfCreatedKey(k)) ?? []);
  } else {
    const entries = (await queryRunIndex(
      plan,
      PAGE_INDEX[plan.indexName],
      limit,
      start,
      false,
    )) as ListedRun[];
    more = entries.length > limit;
    page = entries.slice(0, limit);
    lastKey = page[page.length - 1]?.createdKey;
    const withScenario = page.filter((run) => run.scenario !== undefined).map((run) => run.runId);
    if (withScenario.length) {
      const found = await batchGetRuns(withScenario, 'runId, scenarioState');
      for (const run of page) run.scenarioState = found.get(run.runId)?.scenarioState;
    }
  }
  const runs: ListedRun[] = [];
  for (const run of page) {
    if (run.orgId !== orgId) continue;
    if (plan.folderId !== undefined && run.folder.id !== plan.folderId) return { runs: [] };
    if (matchesFilters(run, filters)) runs.push(run);
  }
  return { runs, ...(more && lastKey ? { lastKey } : {}) };
}

/**
 * List the org's runs, newest first (GET /run), from the indexes whose partition is exactly the filtered
 * set (`planRunQuery`): `offset` runs are skipped reading keys only, or a cursor resumes just after its
 * run; then the page is one Query of the page index (`readRunPage`; with steps, its runs by id). The cost
 * is O(offset + limit) keys and `limit` page entries, whatever the table holds; with a cursor, O(limit).
 * `next` is the next page's cursor.
 */
export async function listRunPage(
  orgId: string,
  filters: RunFilters,
  page: { limit: number } & RunPageStart,
  view: RunView,
  urls?: MediaUrls,
): Promise<RunPage> {
  const plan = planRunQuery(orgId, filters);
  const after = page.cursor !== undefined ? decodeRunCursor(orgId, filters, page.cursor) : undefined;
  const { runs, lastKey } = await readRunPage(
    orgId,
    filters,
    plan,
    page.limit,
    page.offset ?? 0,
    after,
    view.steps,
  );
  const sign = await mintMediaUrls(runs, view, urls);
  return {
    runs: runs.map((run) => toTestRunView(run, view, sign)),
    ...(lastKey ? { next: encodeRunCursor(orgId, filters, lastKey) } : {}),
  };
}

/** List the org's runs, newest first, paged by limit/offset (`listRunPage` without the cursor). */
export async function listRuns(
  orgId: string,
  filters: RunFilters,
  page: { limit: number; offset: number },
  view: RunView,
  urls?: MediaUrls,
): Promise<TestRunView[]> {
  return (await listRunPage(orgId, filters, page, view, urls)).runs;
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
