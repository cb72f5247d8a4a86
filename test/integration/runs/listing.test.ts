import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import fc from 'fast-check';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { failRun, finishRun } from '../../../functions/core/runs/lifecycle.js';
import type { RunFilters } from '../../../functions/core/runs/listing.js';
import { loadRun, type RunItem, type RunStatus } from '../../../functions/core/runs/store.js';
import { keys, tables } from '../../../functions/manifest/tables.js';
import { ddb, localDynamoClientConfig, table } from '../../../functions/shared/aws/dynamo.js';
import { ensureTables, localTableName, startDynalite } from '../../../lib/local/dynalite.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { seedRuns, storedRun } from '../../support/run-items.js';

/*
 * GET /run listing, flat in table size, through real HTTP: every filter answers the same runs as before,
 * newest first, from the one index partition of exactly those runs; the cursor extension (`Link: <…>;
 * rel="next"`) pages through everything without duplicates; bad cursors are 400; write paths keep the status
 * keys. Runs are seeded straight into the table with the key builders (as `startRun` writes them).
 */

const h = localServerForFile();
let org: OrgCredentials;
let other: OrgCredentials;
beforeAll(async () => {
  org = await h.newOrg('listing');
  other = await h.newOrg('listing-other');
}, 60_000);

const STATUSES: RunStatus[] = ['passed', 'failed', 'running', 'pending'];
/** Tests and their folders: a test never changes folder. */
const FOLDER_OF: Record<string, string> = { t0: 'fA', t1: 'fA', t2: 'fB', t3: 'fB' };
const base = Date.parse('2026-03-01T00:00:00.000Z');

/** A run item as `startRun` stores it (every index key from `keys.runs.indexKeys`). */
function runItem(orgId: string, i: number, testId: string, status: RunStatus, prefix = 'seed'): RunItem {
  const runId = `${prefix}${String(i).padStart(5, '0')}`;
  const createdAt = new Date(base + i * 1000).toISOString();
  return storedRun({ orgId, runId, testId, folderId: FOLDER_OF[testId]!, status, createdAt });
}

const seed = seedRuns;

/** Seeded runs in creation order; t0 never has a `pending` run (a filter that matches nothing). */
const seeded: RunItem[] = [];
const tests = Object.keys(FOLDER_OF);
beforeAll(async () => {
  for (let i = 0; i < 230; i++) {
    const testId = tests[i % 4]!;
    let status = STATUSES[Math.floor(i / 4) % 4]!;
    if (testId === 't0' && status === 'pending') status = 'failed';
    seeded.push(runItem(org.orgId, i, testId, status));
  }
  await seed(seeded);
  // Another org's runs of tests and folders of the same ids: never in this org's answers.
  await seed([0, 1, 2, 3].map((i) => runItem(other.orgId, 1000 + i, tests[i]!, 'passed', 'other')));
}, 60_000);

const expected = (f: RunFilters) =>
  seeded
    .filter(
      (r) =>
        (f.testId === undefined || r.testId === f.testId) &&
        (f.folderId === undefined || r.folder.id === f.folderId) &&
        (f.status === undefined || r.status === f.status),
    )
    .map((r) => r.runId)
    .reverse();

const query = (f: RunFilters, extra: Record<string, string> = {}) => {
  const q = new URLSearchParams(extra);
  if (f.testId) q.set('test', f.testId);
  if (f.folderId) q.set('folder', f.folderId);
  if (f.status) q.set('status', f.status);
  const s = q.toString();
  return s ? `?${s}` : '';
};

async function get(path: string, who: OrgCredentials = org) {
  return call(h, 'GET', path, { headers: client(who) });
}

/** Path and query of a `Link: <url>; rel="next"` header, or undefined. */
function nextOf(link: string | null): string | undefined {
  if (link === null) return undefined;
  const m = /^<([^>]+)>; rel="next"$/.exec(link);
  if (!m) throw new Error(`not a next link: ${link}`);
  const url = new URL(m[1]!);
  return `${url.pathname}${url.search}`;
}

const FILTERS: [string, RunFilters][] = [
  ['none', {}],
  ['test', { testId: 't1' }],
  ['folder', { folderId: 'fB' }],
  ['status', { status: 'running' }],
  ['test+status', { testId: 't2', status: 'passed' }],
  ['folder+status', { folderId: 'fA', status: 'failed' }],
  ['test+folder', { testId: 't3', folderId: 'fB' }],
  ['test+folder+status', { testId: 't0', folderId: 'fA', status: 'running' }],
  ['test+other folder (matches nothing)', { testId: 't0', folderId: 'fB' }],
  ['test+status that matches nothing', { testId: 't0', status: 'pending' }],
  ['unknown test', { testId: 'nosuchtest' }],
];

describe.each(FILTERS)('filter %s', (_name, f) => {
  test('offset pages answer exactly the filtered runs, newest first', async () => {
    const want = expected(f);
    const got: string[] = [];
    for (let offset = 0; offset <= want.length; offset += 100) {
      const res = await get(`/run${query(f, { limit: '100', offset: String(offset) })}`);
      expect(res.status).toBe(200);
      got.push(...res.body.map((r: { id: string }) => r.id));
    }
    expect(got).toEqual(want);
    const mid = await get(`/run${query(f, { limit: '5', offset: '7' })}`);
    expect(mid.body.map((r: { id: string }) => r.id)).toEqual(want.slice(7, 12));
  });

  test('the Link cursor walks every run once, newest first, and the last page has no Link', async () => {
    const want = expected(f);
    const got: string[] = [];
    let path: string | undefined = `/run${query(f, { limit: '7' })}`;
    let pages = 0;
    while (path) {
      const res = await get(path);
      expect(res.status).toBe(200);
      expect(res.body.length).toBeLessThanOrEqual(7);
      got.push(...res.body.map((r: { id: string }) => r.id));
      path = nextOf(res.headers.get('link'));
      if (path) expect(res.body).toHaveLength(7);
      pages++;
      expect(pages).toBeLessThan(100);
    }
    expect(got).toEqual(want);
    expect(new Set(got).size).toBe(got.length);
    expect(pages).toBe(Math.max(1, Math.ceil(want.length / 7)));
  });
});

describe('the Link header', () => {
  test('keeps the filters, limit, media and steps, and starts after the last run of the page', async () => {
    const f = { folderId: 'fA', status: 'failed' as const };
    const res = await get(`/run${query(f, { limit: '3', media: 'true', steps: 'true' })}`);
    const link = res.headers.get('link')!;
    expect(link).toMatch(new RegExp(`^<${h.url}/run\\?[^>]+>; rel="next"$`));
    const next = new URL(/<([^>]+)>/.exec(link)![1]!);
    expect(Object.fromEntries([...next.searchParams].filter(([k]) => k !== 'cursor'))).toEqual({
      limit: '3',
      folder: 'fA',
      status: 'failed',
      media: 'true',
      steps: 'true',
    });
    // Opaque: neither the org nor a run id is readable in it.
    const cursor = next.searchParams.get('cursor')!;
    expect(cursor).not.toContain(org.orgId);
    expect(cursor).not.toContain(res.body[2].id);
    const page2 = await get(`${next.pathname}${next.search}`);
    expect(page2.body.map((r: { id: string }) => r.id)).toEqual(expected(f).slice(3, 6));
    expect(page2.body[0].steps).toEqual([]);
  });

  test('an offset page links to the page after it', async () => {
    const res = await get('/run?limit=10&offset=30');
    const page2 = await get(nextOf(res.headers.get('link'))!);
    expect(page2.body.map((r: { id: string }) => r.id)).toEqual(expected({}).slice(40, 50));
  });

  test('runs started after the first page do not shift the next one', async () => {
    const f = { testId: 't2' };
    const first = await get(`/run${query(f, { limit: '4' })}`);
    const later = runItem(org.orgId, 5000, 't2', 'passed', 'late');
    await seed([later]);
    try {
      const second = await get(nextOf(first.headers.get('link'))!);
      expect(second.body.map((r: { id: string }) => r.id)).toEqual(expected(f).slice(4, 8));
    } finally {
      await ddb().send(
        new BatchWriteCommand({
          RequestItems: { [table('runs')]: [{ DeleteRequest: { Key: { runId: later.runId } } }] },
        }),
      );
    }
  });

  test('a cursor page is one Query of limit+1 entries of the page index, however deep', async () => {
    let path: string | undefined = '/run?limit=20';
    for (let i = 0; i < 8 && path; i++) path = nextOf((await get(path)).headers.get('link'));
    const spy = jest.spyOn(ddb(), 'send');
    try {
      const res = await get(path!);
      expect(res.body).toHaveLength(20);
      const calls = spy.mock.calls.map((c) => c[0] as { constructor: { name: string }; input: any });
      const runsCalls = calls.filter(
        (c) => c.input.TableName === table('runs') || c.input.RequestItems?.[table('runs')],
      );
      expect(runsCalls.map((c) => c.constructor.name)).toEqual(['QueryCommand']);
      expect(runsCalls[0]!.input).toMatchObject({ IndexName: 'pageOrg', Limit: 21, ScanIndexForward: false });
      expect(runsCalls[0]!.input.ExclusiveStartKey).toBeDefined();
    } finally {
      spy.mockRestore();
    }
  });

  test('an offset skip reads keys only (projected Queries of the listing index), then the page is one Query from there', async () => {
    const spy = jest.spyOn(ddb(), 'send');
    try {
      const res = await get('/run?limit=5&offset=200');
      expect(res.body.map((r: { id: string }) => r.id)).toEqual(expected({}).slice(200, 205));
      const calls = spy.mock.calls.map((c) => c[0] as { constructor: { name: string }; input: any });
      const queries = calls.filter((c) => c.constructor.name === 'QueryCommand');
      const skips = queries.slice(0, -1);
      expect(skips.length).toBeGreaterThan(0);
      for (const q of skips)
        expect(q.input).toMatchObject({ IndexName: 'listOrg', ProjectionExpression: 'createdKey' });
      expect(queries.at(-1)!.input).toMatchObject({ IndexName: 'pageOrg', Limit: 6 });
      // It starts just after the 200th run, the last one skipped.
      expect(queries.at(-1)!.input.ExclusiveStartKey.runId).toBe(expected({})[199]);
      expect(calls.filter((c) => c.constructor.name === 'BatchGetCommand')).toEqual([]);
      expect(calls.filter((c) => c.constructor.name === 'ScanCommand')).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });

  test('with steps=true the page keys come from the listing index and the runs whole by id', async () => {
    const spy = jest.spyOn(ddb(), 'send');
    try {
      const res = await get('/run?limit=5&offset=10&steps=true');
      expect(res.body.map((r: { id: string }) => r.id)).toEqual(expected({}).slice(10, 15));
      for (const run of res.body) expect(Array.isArray(run.steps)).toBe(true);
      const calls = spy.mock.calls.map((c) => c[0] as { constructor: { name: string }; input: any });
      for (const q of calls.filter((c) => c.constructor.name === 'QueryCommand'))
        expect(q.input).toMatchObject({ IndexName: 'listOrg', ProjectionExpression: 'createdKey' });
      const gets = calls.filter((c) => c.constructor.name === 'BatchGetCommand');
      expect(gets.flatMap((g) => g.input.RequestItems[table('runs')].Keys)).toHaveLength(5);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('bad cursors are 400 {error}, never 500', () => {
  let cursor: string;
  const f = { testId: 't1' };
  beforeAll(async () => {
    const res = await get(`/run${query(f, { limit: '2' })}`);
    cursor = new URL(/<([^>]+)>/.exec(res.headers.get('link')!)![1]!).searchParams.get('cursor')!;
  });
  const edited = (fn: (c: { k: string; b: string }) => unknown) =>
    Buffer.from(JSON.stringify(fn(JSON.parse(Buffer.from(cursor, 'base64url').toString())))).toString(
      'base64url',
    );

  test.each([
    ['malformed', () => query(f, { cursor: '!!!not-a-cursor' })],
    ['empty', () => query(f, { cursor: '' })],
    ['not JSON', () => query(f, { cursor: Buffer.from('{').toString('base64url') })],
    ['too long', () => query(f, { cursor: 'A'.repeat(513) })],
    ['of another filter', () => query({ testId: 't2' }, { cursor })],
    ['of the same test in a folder', () => query({ ...f, folderId: 'fA' }, { cursor })],
    ['with offset', () => query(f, { cursor, offset: '3' })],
    ['with its key edited', () => query(f, { cursor: edited((c) => ({ ...c, k: `9${c.k.slice(1)}` })) })],
    [
      "pointing into another org's partition",
      () => query(f, { cursor: edited((c) => ({ ...c, k: `${c.k.split('#')[0]}#other00001` })) }),
    ],
    ['with a huge key', () => query(f, { cursor: edited((c) => ({ ...c, k: 'x'.repeat(300) })) })],
  ])('%s', async (_what, q) => {
    const res = await get(`/run${q()}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringMatching(/^invalid query: cursor: /) });
  });

  test('generated cursors: any text, and base64url of any JSON, is a 400 (never a 500)', async () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 600 });
    const json = fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'));
    const shaped = fc
      .record({ k: fc.oneof(fc.string(), fc.constant('2026-03-01T00:00:00.000Z#seed00001')), b: fc.string() })
      .map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'));
    await fc.assert(
      fc.asyncProperty(fc.oneof(text, json, shaped), async (c) => {
        const res = await get(`/run${query(f, { cursor: c })}`);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ error: expect.stringMatching(/^invalid query: cursor: /) });
      }),
      { numRuns: 150, seed: 14 },
    );
  }, 60_000);

  test("another org's cursor", async () => {
    const res = await get(`/run${query(f, { cursor })}`, other);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringMatching(/^invalid query: cursor: /) });
  });

  test('offset=0 with a cursor is the cursor page', async () => {
    const res = await get(`/run${query(f, { cursor, offset: '0', limit: '2' })}`);
    expect(res.status).toBe(200);
    expect(res.body.map((r: { id: string }) => r.id)).toEqual(expected(f).slice(2, 4));
  });
});

describe('every status write moves the run between the status indexes', () => {
  const ids = async (f: RunFilters) =>
    (await get(`/run${query(f, { limit: '100' })}`)).body.map((r: { id: string }) => r.id);

  test('failRun: pending → failed', async () => {
    const run = runItem(org.orgId, 9000, 't1', 'pending', 'write');
    await seed([run]);
    expect(await ids({ testId: 't1', status: 'pending' })).toContain(run.runId);
    expect(await failRun(run.runId, 'stopped by the test')).toBe(true);
    for (const f of [
      { testId: 't1', status: 'failed' as const },
      { folderId: 'fA', status: 'failed' as const },
      { status: 'failed' as const },
    ]) {
      const got = await ids(f);
      expect(got[0]).toBe(run.runId);
    }
    expect(await ids({ testId: 't1', status: 'pending' })).not.toContain(run.runId);
    expect(await ids({ folderId: 'fA', status: 'pending' })).not.toContain(run.runId);
  });

  test('finishRun: running → passed', async () => {
    const run = { ...runItem(org.orgId, 9001, 't2', 'running', 'write'), attempt: 'attempt-1' };
    await seed([run]);
    await finishRun(run, 'attempt-1', { status: 'passed', steps: [] });
    expect((await ids({ testId: 't2', status: 'passed' }))[0]).toBe(run.runId);
    expect((await ids({ folderId: 'fB', status: 'passed' }))[0]).toBe(run.runId);
    expect(await ids({ folderId: 'fB', status: 'running' })).not.toContain(run.runId);
    const stored = await loadRun(run.runId);
    expect(stored).toMatchObject(
      keys.runs.statusKeys({ orgId: org.orgId, testId: 't2', folderId: 'fB', status: 'passed' }),
    );
  });
});

describe('the local tables of an older version', () => {
  test('are rebuilt with the manifest indexes, older runs backfilled, once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'preview-listing-migrate-'));
    const dyn = await startDynalite(join(dir, 'db'));
    const c = new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(dyn.endpoint) });
    try {
      const name = localTableName('runs');
      const S = (n: string) => ({ AttributeName: n, AttributeType: 'S' as const });
      const old = ['orgId', 'testKey', 'folderKey', 'statusKey'];
      await c.send(
        new CreateTableCommand({
          TableName: name,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [S('runId'), S('createdKey'), ...old.map(S)],
          KeySchema: [{ AttributeName: 'runId', KeyType: 'HASH' }],
          GlobalSecondaryIndexes: old.map((k, i) => ({
            IndexName: ['byOrg', 'byTest', 'byFolder', 'byStatus'][i],
            KeySchema: [
              { AttributeName: k, KeyType: 'HASH' },
              { AttributeName: 'createdKey', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          })),
        }),
      );
      // dynalite makes a table ACTIVE a tick after CreateTable.
      while ((await c.send(new DescribeTableCommand({ TableName: name }))).Table?.TableStatus !== 'ACTIVE')
        await new Promise((r) => setTimeout(r, 10));
      for (let i = 0; i < 30; i++) {
        const {
          testStatusKey: _t,
          folderStatusKey: _f,
          ...older
        } = runItem('orgM', i, tests[i % 4]!, 'passed');
        await c.send(
          new PutItemCommand({
            TableName: name,
            Item: {
              ...Object.fromEntries(
                Object.entries(older)
                  .filter(([, v]) => typeof v === 'string')
                  .map(([k, v]) => [k, { S: v as string }]),
              ),
              folder: { M: { id: { S: older.folder.id }, name: { S: older.folder.name } } },
              variables: { M: {} },
              steps: { L: [] },
            },
          }),
        );
      }
      await ensureTables(dyn.endpoint);
      const described = await c.send(new DescribeTableCommand({ TableName: name }));
      expect((described.Table?.GlobalSecondaryIndexes ?? []).map((ix) => ix.IndexName).sort()).toEqual(
        tables.runs.indexes.map((ix) => ix.name).sort(),
      );
      const one = await c.send(new GetItemCommand({ TableName: name, Key: { runId: { S: 'seed00005' } } }));
      expect(one.Item?.testStatusKey).toEqual({ S: 'orgM#t1#passed' });
      expect(one.Item?.folderStatusKey).toEqual({ S: 'orgM#fA#passed' });
      expect(one.Item?.folder).toEqual({ M: { id: { S: 'fA' }, name: { S: 'folder fA' } } });
      // A second start changes nothing (no table recreated, no temporary table left).
      const created = async () =>
        Promise.all(
          Object.keys(tables).map(
            async (t) =>
              (await c.send(new DescribeTableCommand({ TableName: localTableName(t) }))).Table
                ?.CreationDateTime,
          ),
        );
      const before = await created();
      await ensureTables(dyn.endpoint);
      expect(await created()).toEqual(before);
      expect((await c.send(new ScanCommand({ TableName: name, Select: 'COUNT' }))).Count).toBe(30);
      await expect(
        c.send(new DescribeTableCommand({ TableName: `${name}-migrating` })),
      ).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
    } finally {
      c.destroy();
      await dyn.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('a page (from the page index) shows each run as GET /run/{id} (the whole item) does', () => {
  test('error, video, application version and scenario metadata included', async () => {
    const viewer = await h.newOrg('listing-view');
    const plain = runItem(viewer.orgId, 1, 't0', 'passed', 'view');
    const failed: RunItem = {
      ...runItem(viewer.orgId, 2, 't0', 'failed', 'view'),
      endedAt: new Date(base + 2500).toISOString(),
      error: 'the run failed: step 2 timed out',
      videoKey: `runs/${viewer.orgId}/view00002/video.webm`,
      applicationVersionId: 'env-7',
      steps: [
        {
          id: 's1',
          instruction: 'open the page',
          interaction: 'navigate',
          url: 'http://127.0.0.1:1/',
          element: { html: '', selector: '' },
          output: 'ok',
          status: 'passed',
          imageKey: `runs/${viewer.orgId}/view00002/step-001-s1.png`,
        },
      ],
    };
    const withScenario: RunItem = {
      ...runItem(viewer.orgId, 3, 't0', 'passed', 'view'),
      scenario: { setupId: 'setup1', recipe: 'two users' },
      scenarioState: {
        setupId: 'setup1',
        name: 'two users',
        testRunId: 'view00003',
        testRunShortId: 'v3',
        status: 'down',
        upMs: 120,
        downMs: 30,
        refs: JSON.stringify({ users: ['a', 'b'] }),
      },
    };
    await seed([plain, failed, withScenario]);
    // Media URLs are signed with an expiry: compared without their query.
    const unsigned = (v: unknown) => JSON.parse(JSON.stringify(v).replace(/(https?:[^"?]*)\?[^"]*/g, '$1'));
    const cases: [string, string][] = [
      ['', ''],
      ['?media=true', '?media=true'],
      ['?test=t0&status=passed', ''],
      ['?media=true&steps=true', '?media=true&steps=true'],
    ];
    for (const [listQuery, viewQuery] of cases) {
      const listed = await get(`/run${listQuery}`, viewer);
      expect(listed.status).toBe(200);
      expect(listed.body.length).toBe(listQuery.includes('status=passed') ? 2 : 3);
      for (const run of listed.body) {
        const one = await get(`/run/${run.id}${viewQuery}`, viewer);
        expect(one.status).toBe(200);
        expect(unsigned(run)).toEqual(unsigned(one.body));
      }
    }
    expect((await get('/run?media=true', viewer)).body[1].video_url).toMatch(/video\.webm\?/);
    const [scenarioRun] = (await get('/run?limit=1', viewer)).body;
    expect(scenarioRun.metadata).toMatchObject({
      scenario: { setup_id: 'setup1', recipe: 'two users', status: 'down' },
      test_run_id: 'view00003',
      scenario_up_ms: 120,
    });
  });
});
