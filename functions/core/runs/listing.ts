import { timingSafeEqual } from 'node:crypto';
import { BatchGetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import { ddb, table } from '../../shared/aws/dynamo.js';
import { sha256Hex } from '../../shared/crypto.js';
import { ValidationError } from '../../shared/errors.js';
import { type RunItem, type RunStatus, runKey } from './store.js';
import {
  type ListedRun,
  type MediaUrls,
  mintMediaUrls,
  type RunView,
  type TestRunView,
  toTestRunView,
} from './views.js';

/*
 * GET /run: the listing planner (which index partition is exactly the filtered set), its opaque cursors,
 * and the page reads (keys skipped for `offset`, one Query of the page index, runs by id with steps).
 */

export interface RunFilters {
  testId?: string;
  folderId?: string;
  status?: RunStatus;
  /** Only runs that passed after a failed attempt (`flaky=true`); absent or false: all runs. */
  flaky?: boolean;
  /** Only runs that ended with a healed step (`healed=true`); absent or false: all runs. */
  healed?: boolean;
}

/** The runs listing indexes GET /run skips and finds keys on (functions/manifest/tables.ts). */
export type RunIndexName =
  | 'listOrg'
  | 'listTest'
  | 'listFolder'
  | 'listStatus'
  | 'listTestStatus'
  | 'listFolderStatus'
  | 'listFlaky'
  | 'listHealed';

/** The `page*` index beside each listing index: the same keys, carrying `RUN_LISTING` (a page's runs). */
const PAGE_INDEX = {
  listOrg: 'pageOrg',
  listTest: 'pageTest',
  listFolder: 'pageFolder',
  listStatus: 'pageStatus',
  listTestStatus: 'pageTestStatus',
  listFolderStatus: 'pageFolderStatus',
  // Sparse and small: the one index is both (it carries `RUN_LISTING`).
  listFlaky: 'listFlaky',
  // Keys only: a page of it reads its runs by id (`healedPage`).
  listHealed: 'listHealed',
} as const satisfies Record<RunIndexName, string>;

/** Which index partition holds exactly the runs a filter asks for. */
export interface RunQueryPlan {
  indexName: RunIndexName;
  keyName:
    | 'orgId'
    | 'testKey'
    | 'folderKey'
    | 'statusKey'
    | 'testStatusKey'
    | 'folderStatusKey'
    | 'flakyKey'
    | 'healedKey';
  keyValue: string;
  /**
   * With both test and folder: the folder the test's runs must be in. A test never changes folder (tests
   * are immutable and a run copies its test's), so the test's partition is either all of the answer or
   * none of it; the first fetched run says which.
   */
  folderId?: string;
  /**
   * With `flaky`: the other filters, applied by the Query itself (a FilterExpression on what `listFlaky`
   * carries), since the org's flaky partition is not theirs. What it costs is said at `indexEntries`.
   */
  filter?: Omit<RunFilters, 'flaky'>;
}

/**
 * The index whose partition is exactly the filtered set: (test, status), (folder, status), test, folder,
 * status, or the whole org. Test and folder together read the test's partition (see `folderId`).
 */
export function planRunQuery(orgId: string, filters: RunFilters): RunQueryPlan {
  const { testId, folderId, status } = filters;
  if (filters.flaky) {
    const rest = {
      ...(testId !== undefined ? { testId } : {}),
      ...(folderId !== undefined ? { folderId } : {}),
      ...(status !== undefined ? { status } : {}),
    };
    return {
      indexName: 'listFlaky',
      keyName: 'flakyKey',
      keyValue: keys.runs.flaky(orgId),
      ...(Object.keys(rest).length ? { filter: rest } : {}),
    };
  }
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
export function matchesFilters(
  run: Pick<RunItem, 'testId' | 'folder' | 'status' | 'flaky' | 'healedSteps'>,
  f: RunFilters,
): boolean {
  return (
    (f.testId === undefined || run.testId === f.testId) &&
    (f.folderId === undefined || run.folder.id === f.folderId) &&
    (f.status === undefined || run.status === f.status) &&
    (!f.flaky || run.flaky === true) &&
    (!f.healed || (run.healedSteps ?? 0) > 0)
  );
}

/** Longest `createdKey` a cursor may carry (an ISO time, `#`, a run id). */
const MAX_CURSOR_KEY = 200;
const CURSOR_KEY_RE = /^\d{4}-\d\d-\d\dT[\d:.]+Z#[A-Za-z0-9_-]+$/;

/** What binds a cursor to the org and the filter it was issued for (not a secret: see `encodeRunCursor`). */
function cursorBinding(orgId: string, filters: RunFilters, createdKey: string): string {
  const f = [filters.testId ?? null, filters.folderId ?? null, filters.status ?? null];
  // `flaky` only when set, so the cursors of the other listings stay what they were.
  const flaky = [...(filters.flaky ? ['flaky'] : []), ...(filters.healed ? ['healed'] : [])];
  return sha256Hex(JSON.stringify(['run-cursor-1', orgId, ...f, createdKey, ...flaky])).slice(0, 32);
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

/** Items a filtered Query reads at least per request (its `Limit` counts items read, not items kept). */
const FILTERED_READ = 100;

/** A plan's `filter` as a Query's FilterExpression, on attributes `listFlaky` carries. */
function filterExpression(filter: RunQueryPlan['filter']) {
  if (!filter) return undefined;
  const terms: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  if (filter.testId !== undefined) {
    terms.push('#fTest = :fTest');
    names['#fTest'] = 'testId';
    values[':fTest'] = filter.testId;
  }
  if (filter.folderId !== undefined) {
    terms.push('#fFolder.#fId = :fFolder');
    names['#fFolder'] = 'folder';
    names['#fId'] = 'id';
    values[':fFolder'] = filter.folderId;
  }
  if (filter.status !== undefined) {
    terms.push('#fStatus = :fStatus');
    names['#fStatus'] = 'status';
    values[':fStatus'] = filter.status;
  }
  return { expression: terms.join(' AND '), names, values };
}

/**
 * At most `count` entries of `indexName` in the plan's partition after `start` (exclusive; the newest when
 * absent), newest first: their `createdKey` only (`keysOnly`), or all the index carries. The page reads'
 * own paging rather than `queryItems`: each Query asks for just what is still missing (`Limit` shrinks
 * after a page the 1 MB cut-off ended early), so a read costs the entries it needs and no more. With the
 * plan's `filter` (`flaky=true` with another filter) the Query reads the org's flaky runs and keeps those
 * that match, `FILTERED_READ` or more at a time, until it has `count`: O(the org's flaky runs) at worst,
 * which only a retried test that failed then passed adds to. Readers position by the `createdKey` of the
 * last entry they took, never by the Query's own last key, so reading past `count` moves nothing.
 */
async function* indexEntries(
  plan: RunQueryPlan,
  indexName: string,
  count: number,
  start: string | undefined,
  keysOnly: boolean,
): AsyncGenerator<Record<string, unknown>> {
  let read = 0;
  let startKey = indexStartKey(plan, start);
  const filter = filterExpression(plan.filter);
  while (read < count) {
    const res = await ddb().send(
      new QueryCommand({
        TableName: table('runs'),
        IndexName: indexName,
        KeyConditionExpression: '#k = :k',
        ...(keysOnly ? { ProjectionExpression: 'createdKey' } : {}),
        ...(filter ? { FilterExpression: filter.expression } : {}),
        ExpressionAttributeNames: { '#k': plan.keyName, ...filter?.names },
        ExpressionAttributeValues: { ':k': plan.keyValue, ...filter?.values },
        ScanIndexForward: false,
        Limit: filter ? Math.max(count - read, FILTERED_READ) : count - read,
        ExclusiveStartKey: startKey,
      }),
    );
    for (const item of res.Items ?? []) {
      if (read === count) return;
      yield item;
      read++;
    }
    startKey = res.LastEvaluatedKey;
    if (!startKey) break;
  }
}

/**
 * Skip `skip` runs of the plan's listing index from `start` (exclusive; the newest when absent), reading
 * keys only (`createdKey`). Returns the `createdKey` of the last run skipped, the start again when `skip`
 * is 0, and `null` when the partition holds fewer runs than that.
 */
async function skipRunKeys(plan: RunQueryPlan, skip: number, start: string | undefined) {
  let last = start;
  let skipped = 0;
  for await (const item of indexEntries(plan, plan.indexName, skip, start, true)) {
    last = String(item.createdKey);
    skipped++;
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
  for await (const item of indexEntries(plan, indexName, limit + 1, start, keysOnly)) items.push(item);
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
 * A page of `healed=true`: the org's runs with a healed step, from the sparse keys-only `listHealed`
 * index (the indexes' 100 projected attributes have too few left for a page index of it), each read by
 * id (BatchGetItem, its steps dropped unless asked for) and checked against the other filters, `offset`
 * matching runs skipped, until `limit + 1` match. O(offset + limit) runs read alone; with another filter,
 * O(the org's healed runs) at worst.
 */
async function healedPage(
  orgId: string,
  filters: RunFilters,
  _plan: RunQueryPlan,
  limit: number,
  skip: number,
  after: string | undefined,
  withSteps: boolean,
): Promise<{ runs: ListedRun[]; lastKey?: string }> {
  const plan: RunQueryPlan = {
    indexName: 'listHealed',
    keyName: 'healedKey',
    keyValue: keys.runs.healed(orgId),
  };
  const taken: { run: ListedRun; key: string }[] = [];
  let skipped = 0;
  let start = after;
  for (;;) {
    const entries = await queryRunIndex(plan, 'listHealed', FILTERED_READ - 1, start, true);
    const ks = entries.map((e) => String(e.createdKey));
    const found = await batchGetRuns(ks.map(runIdOfCreatedKey));
    for (const key of ks) {
      const run = found.get(runIdOfCreatedKey(key));
      if (!run || run.orgId !== orgId || !matchesFilters(run, filters)) continue;
      if (skipped < skip) {
        skipped++;
        continue;
      }
      const { steps, variables: _variables, ...rest } = run;
      taken.push({ run: withSteps ? { ...rest, steps } : rest, key });
      if (taken.length > limit) break;
    }
    if (taken.length > limit || entries.length < FILTERED_READ) break;
    start = ks[ks.length - 1];
  }
  const page = taken.slice(0, limit);
  const lastKey = page[page.length - 1]?.key;
  return { runs: page.map((t) => t.run), ...(taken.length > limit && lastKey ? { lastKey } : {}) };
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
  const read = filters.healed ? healedPage : readRunPage;
  const { runs, lastKey } = await read(orgId, filters, plan, page.limit, page.offset ?? 0, after, view.steps);
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
