import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../manifest/tables.js';
import { newId } from '../shared/crypto.js';
import { ddb, table } from '../shared/dynamo.js';
import { NotFoundError } from '../shared/errors.js';
import { copyStep, type Folder, findTest, type StepElement } from './tests.js';

export const RUN_STATUSES = ['pending', 'running', 'passed', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** A step of a run as stored: a copy of the test's step (same id) plus its outcome. */
export interface RunStepItem {
  id: string;
  instruction: string;
  interaction: string;
  url: string;
  element: StepElement;
  output: string;
  status: RunStatus;
  /** Storage key of the step's screenshot, once the executor stores one. */
  imageKey?: string;
}

/**
 * A run as stored (table `runs`, key `runId`). `variables` are the test's saved variables with this run's
 * overrides applied: internal, never in a response. The `*Key` attributes feed the four GSIs.
 */
export interface RunItem {
  runId: string;
  orgId: string;
  testId: string;
  /** The test's name when the run started. */
  name: string;
  status: RunStatus;
  createdAt: string;
  endedAt?: string;
  folder: Folder;
  source: string;
  applicationVersionId?: string;
  variables: Record<string, string>;
  steps: RunStepItem[];
  /** Storage key of the run's video, once the executor stores one. */
  videoKey?: string;
  /** `<createdAt>#<runId>`: the sort key of every index (newest first when read backwards). */
  createdKey: string;
  testKey: string;
  folderKey: string;
  statusKey: string;
}

export interface RunStepView {
  id: string;
  instruction: string;
  interaction: string;
  output: string;
  status: RunStatus;
  url: string;
  element: StepElement;
  image: string | null;
}

/** What callers see (TestRun). */
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
  metadata: { source: string; application_version_id?: string };
  steps?: RunStepView[];
}

/** What to include in a TestRun: media URLs (`media=true`) and steps (`steps=true`). */
export interface RunView {
  media: boolean;
  steps: boolean;
}

/**
 * Turns a stored media key into a URL that expires after 1 hour. No executor stores media yet, so no
 * signer exists: the default signs nothing. A media port (S3 presigner / local file server) plugs in here.
 */
export type MediaSigner = (key: string) => string | null;
const noMedia: MediaSigner = () => null;

/**
 * The saved variables with overrides applied: a name the test does not save is ignored, a saved name's
 * value is replaced. Own properties only (a `__proto__` or `toString` override matches nothing).
 */
export function resolveVariables(
  saved: Record<string, string>,
  overrides: Record<string, string>,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(saved).map(([name, value]) => [
      name,
      Object.hasOwn(overrides, name) ? (overrides[name] as string) : value,
    ]),
  );
}

export interface StartRunInput {
  applicationVersionId?: string;
  /** @default 'api' */
  source?: string;
  /** Overrides of the test's saved variables, by name. */
  runtimeMetadata?: Record<string, string>;
}

/**
 * Start a run of a test (POST /test/{test_id}/run).
 * Steps: load the test (404 if absent or another org's); resolve its variables with the overrides; put a
 * `pending` run holding copies of the test's steps and every index key. Executing runs is a later issue:
 * until then a run stays `pending`.
 * @returns the new run's id
 */
export async function startRun(orgId: string, testId: string, input: StartRunInput = {}): Promise<string> {
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
    variables: resolveVariables(test.variables ?? {}, input.runtimeMetadata ?? {}),
    steps: test.steps.map((s) => ({ ...copyStep(s), output: '', status })),
    createdKey: keys.runs.created(createdAt, runId),
    testKey: keys.runs.byTest(orgId, testId),
    folderKey: keys.runs.byFolder(orgId, test.folder.id),
    statusKey: keys.runs.byStatus(orgId, status),
  };
  await ddb().send(
    new PutCommand({
      TableName: table('runs'),
      Item: run,
      ConditionExpression: 'attribute_not_exists(runId)',
    }),
  );
  return runId;
}

export function toTestRunView(run: RunItem, view: RunView, sign: MediaSigner = noMedia): TestRunView {
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
    },
    ...(view.steps
      ? {
          steps: run.steps.map((s) => ({
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

/** GET /run/{run_id}: one run of the caller's org (404 otherwise). */
export async function getRun(orgId: string, runId: string, view: RunView): Promise<TestRunView> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('runs'), Key: { runId }, ConsistentRead: true }),
  );
  const run = Item as RunItem | undefined;
  if (!run || run.orgId !== orgId) throw new NotFoundError('run not found');
  return toTestRunView(run, view);
}

export interface RunFilters {
  testId?: string;
  folderId?: string;
  status?: RunStatus;
}

/** Which index to read for a list, and the filters its key does not cover (applied in code). */
export interface RunQueryPlan {
  indexName: 'byTest' | 'byFolder' | 'byStatus' | 'byOrg';
  keyName: 'testKey' | 'folderKey' | 'statusKey' | 'orgId';
  keyValue: string;
  residual: RunFilters;
}

/** The most selective index for the filters: test, then folder, then status, else the whole org. */
export function planRunQuery(orgId: string, filters: RunFilters): RunQueryPlan {
  const { testId, folderId, status } = filters;
  if (testId !== undefined)
    return {
      indexName: 'byTest',
      keyName: 'testKey',
      keyValue: keys.runs.byTest(orgId, testId),
      residual: { folderId, status },
    };
  if (folderId !== undefined)
    return {
      indexName: 'byFolder',
      keyName: 'folderKey',
      keyValue: keys.runs.byFolder(orgId, folderId),
      residual: { status },
    };
  if (status !== undefined)
    return {
      indexName: 'byStatus',
      keyName: 'statusKey',
      keyValue: keys.runs.byStatus(orgId, status),
      residual: {},
    };
  return { indexName: 'byOrg', keyName: 'orgId', keyValue: orgId, residual: {} };
}

/** Whether a run passes the filters (an absent filter passes everything). */
export function matchesFilters(run: Pick<RunItem, 'testId' | 'folder' | 'status'>, f: RunFilters): boolean {
  return (
    (f.testId === undefined || run.testId === f.testId) &&
    (f.folderId === undefined || run.folder.id === f.folderId) &&
    (f.status === undefined || run.status === f.status)
  );
}

/**
 * List the org's runs, newest first (GET /run). Never scans: it queries the most selective index
 * backwards, applies the remaining filters in code, and pages with ExclusiveStartKey until
 * `offset + limit` matching runs are seen or the index is exhausted.
 */
export async function listRuns(
  orgId: string,
  filters: RunFilters,
  page: { limit: number; offset: number },
  view: RunView,
): Promise<TestRunView[]> {
  const plan = planRunQuery(orgId, filters);
  const filtered = Object.values(plan.residual).some((v) => v !== undefined);
  const out: RunItem[] = [];
  let skipped = 0;
  let startKey: Record<string, unknown> | undefined;
  do {
    const need = page.offset - skipped + page.limit - out.length;
    const res = await ddb().send(
      new QueryCommand({
        TableName: table('runs'),
        IndexName: plan.indexName,
        KeyConditionExpression: '#k = :k',
        ExpressionAttributeNames: { '#k': plan.keyName },
        ExpressionAttributeValues: { ':k': plan.keyValue },
        ScanIndexForward: false,
        // Unfiltered, read what is still needed; filtered, read larger pages; never more than 1000 a page.
        Limit: Math.min(filtered ? Math.max(need, 100) : need, 1000),
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of (res.Items ?? []) as RunItem[]) {
      if (out.length >= page.limit) break;
      if (!matchesFilters(item, plan.residual)) continue;
      if (skipped < page.offset) skipped++;
      else out.push(item);
    }
    startKey = res.LastEvaluatedKey;
  } while (startKey && out.length < page.limit);
  return out.map((run) => toTestRunView(run, view));
}
