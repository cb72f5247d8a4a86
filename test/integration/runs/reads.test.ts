import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { ddb } from '../../../functions/shared/aws/dynamo.js';
import { call, client } from '../../support/api.js';
import { scanTable } from '../../support/stored-state.js';
import {
  clickStep,
  importOne,
  loginStep,
  NO_APPLICATION,
  runRoutesForFile,
  setRunStatus,
  sleep,
  TEST_RUN_KEYS,
} from './routes-fixture.js';

/*
 * Reading runs: `GET /run/{run_id}`, what another organization sees, and the `GET /run` listing, through
 * real HTTP against the local server and dynalite.
 */

const { h, startRunOf, ended } = runRoutesForFile();

describe('GET /run/{run_id}', () => {
  let testId: string;
  let runId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
    runId = (await startRunOf(h.org, testId)).body.run_id;
  });

  test('steps=true adds copies of the test steps (skipped: a run without an application never ran)', async () => {
    const testRes = await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(h.org) });
    await ended(h.org, runId);
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([...TEST_RUN_KEYS, 'error', 'steps'].sort());
    expect(res.body.steps).toEqual(
      testRes.body.steps.map((s: any) => ({
        id: s.id,
        instruction: s.instruction,
        interaction: s.interaction,
        output: '',
        status: 'skipped',
        url: s.url,
        element: s.element,
        image: null,
      })),
    );
    expect(Object.keys(res.body.steps[0]).sort()).toEqual(
      ['element', 'id', 'image', 'instruction', 'interaction', 'output', 'status', 'url'].sort(),
    );
  });

  test('steps=false and media=true: no steps, and no video until the run has one', async () => {
    const res = await call(h, 'GET', `/run/${runId}?steps=false&media=true`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(res.body.steps).toBeUndefined();
    expect(res.body.video_url).toBeNull();
  });

  test.each([
    ['media=yes', 'invalid query: media: must be true or false'],
    ['steps=1', 'invalid query: steps: must be true or false'],
    ['steps=TRUE', 'invalid query: steps: must be true or false'],
  ])('%s is 400', async (q, error) => {
    const res = await call(h, 'GET', `/run/${runId}?${q}`, { headers: client(h.org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error });
  });

  test('unknown run is 404', async () => {
    const res = await call(h, 'GET', '/run/doesnotexist', { headers: client(h.org) });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'run not found' });
  });
});

describe('cross-organization', () => {
  let other: OrgCredentials;
  let testId: string;
  let runId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
    runId = (await startRunOf(h.org, testId)).body.run_id;
    other = await h.newOrg('org-b');
  });

  test("another org's test is 404 to read and to run", async () => {
    const get = await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(other) });
    expect(get.status).toBe(404);
    expect(get.body).toEqual({ error: 'test not found' });
    const run = await startRunOf(other, testId, { runtime_metadata: { EMAIL: 'x' } });
    expect(run.status).toBe(404);
    expect(run.body).toEqual({ error: 'test not found' });
  });

  test("another org's run is 404", async () => {
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(other) });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'run not found' });
  });

  test("another org's list is empty, with or without filters", async () => {
    for (const q of ['', `?test=${testId}`, '?folder=folder-checkout', '?status=pending']) {
      const res = await call(h, 'GET', `/run${q}`, { headers: client(other) });
      expect({ q, status: res.status, body: res.body }).toEqual({ q, status: 200, body: [] });
    }
  });
});

describe('GET /run', () => {
  // An org of its own, so every count and order below is exact.
  let org: OrgCredentials;
  let testA: string;
  let testB: string;
  let testC: string;
  /** Run ids in creation order. */
  const created: string[] = [];
  const runsOf: Record<string, string[]> = {};
  const newestFirst = (ids: string[]) => created.filter((id) => ids.includes(id)).reverse();
  const list = async (q: string) => {
    const res = await call(h, 'GET', `/run${q}`, { headers: client(org) });
    expect(res.status).toBe(200);
    return res.body as any[];
  };
  const ids = async (q: string) => (await list(q)).map((r) => r.id as string);

  beforeAll(async () => {
    org = await h.newOrg('lister');
    testA = await importOne(org, { name: 'A', folder: { id: 'f1', name: 'Folder one' } });
    testB = await importOne(org, { name: 'B', folder: { id: 'f1', name: 'Folder one' } });
    testC = await importOne(org, { name: 'C', folder: { id: 'f2', name: 'Folder two' } });
    const plan: [string, number][] = [
      [testA, 25],
      [testB, 3],
      [testC, 2],
    ];
    for (const [testId, n] of plan) {
      runsOf[testId] = [];
      for (let i = 0; i < n; i++) {
        const res = await startRunOf(org, testId);
        expect(res.status).toBe(201);
        created.push(res.body.run_id);
        runsOf[testId]!.push(res.body.run_id);
        await sleep(2); // distinct created_at, so "newest first" is the creation order reversed
      }
    }
    // Each ends failed at once (no application); then a few are moved to the other statuses.
    for (const id of created) await ended(org, id);
    await setRunStatus(org.orgId, runsOf[testB]![0]!, 'passed');
    await setRunStatus(org.orgId, runsOf[testC]![0]!, 'passed');
    await setRunStatus(org.orgId, runsOf[testA]![3]!, 'pending');
    await setRunStatus(org.orgId, runsOf[testB]![1]!, 'running');
  }, 90_000);

  test('default: the 20 newest runs of the org, each a TestRun without steps', async () => {
    const runs = await list('');
    expect(runs.map((r) => r.id)).toEqual(newestFirst(created).slice(0, 20));
    for (const r of runs)
      expect(Object.keys(r).sort()).toEqual(
        r.status === 'failed' ? [...TEST_RUN_KEYS, 'error'].sort() : TEST_RUN_KEYS,
      );
    expect(runs[0]).toEqual({
      id: runsOf[testC]![1],
      name: 'C',
      test_id: testC,
      status: 'failed',
      error: NO_APPLICATION,
      created_at: expect.any(String),
      ended_at: expect.any(String),
      folder_run_id: null,
      job_run_id: null,
      job_id: null,
      folder: { id: 'f2', name: 'Folder two' },
      video_url: null,
      metadata: { source: 'api' },
      report_url: expect.stringMatching(/\/report\/[a-z0-9]+\?expires=\d+&sig=[\w-]+$/),
    });
  });

  test('created_at is strictly decreasing', async () => {
    const runs = await list('?limit=100');
    expect(runs).toHaveLength(30);
    for (let i = 1; i < runs.length; i++) expect(runs[i - 1].created_at > runs[i].created_at).toBe(true);
  });

  test('limit and offset walk the whole list without overlap', async () => {
    const walked: string[] = [];
    for (let offset = 0; offset < 35; offset += 7) walked.push(...(await ids(`?limit=7&offset=${offset}`)));
    expect(walked).toEqual(newestFirst(created));
    expect(await ids('?offset=30')).toEqual([]);
    expect(await ids('?limit=1&offset=29')).toEqual([created[0]]);
    expect(await ids('?offset=25')).toEqual(newestFirst(created).slice(25));
  });

  test('steps=true and media=true shape every item', async () => {
    const runs = await list(`?test=${testC}&steps=true&media=true`);
    expect(runs).toHaveLength(2);
    for (const r of runs) {
      expect(r.video_url).toBeNull();
      expect(r.steps.map((s: any) => [s.instruction, s.status, s.output, s.image])).toEqual([
        [loginStep.instruction, 'skipped', '', null],
        [clickStep.instruction, 'skipped', '', null],
      ]);
    }
  });

  test('filter by test', async () => {
    expect(await ids(`?test=${testA}`)).toEqual(newestFirst(runsOf[testA]!).slice(0, 20));
    expect(await ids(`?test=${testA}&limit=100`)).toEqual(newestFirst(runsOf[testA]!));
    expect(await ids(`?test=${testB}&offset=1&limit=1`)).toEqual([runsOf[testB]![1]]);
    expect(await ids('?test=unknowntest')).toEqual([]);
  });

  test('filter by folder', async () => {
    const f1 = [...runsOf[testA]!, ...runsOf[testB]!];
    expect(await ids('?folder=f1&limit=100')).toEqual(newestFirst(f1));
    expect(await ids('?folder=f2')).toEqual(newestFirst(runsOf[testC]!));
    expect(await ids('?folder=f1&limit=2&offset=2')).toEqual(newestFirst(f1).slice(2, 4));
  });

  test('filter by status', async () => {
    expect(await ids('?status=passed')).toEqual([runsOf[testC]![0], runsOf[testB]![0]]);
    expect(await ids('?status=pending')).toEqual([runsOf[testA]![3]]);
    expect(await ids('?status=running')).toEqual([runsOf[testB]![1]]);
    const changed = [runsOf[testB]![0]!, runsOf[testC]![0]!, runsOf[testA]![3]!, runsOf[testB]![1]!];
    const failed = created.filter((id) => !changed.includes(id));
    expect(await ids('?status=failed&limit=100')).toEqual(newestFirst(failed));
    const passed = await list('?status=passed');
    expect(passed.map((r) => r.status)).toEqual(['passed', 'passed']);
  });

  test('filters combine', async () => {
    expect(await ids('?folder=f1&status=passed')).toEqual([runsOf[testB]![0]]);
    expect(await ids(`?test=${testA}&status=pending`)).toEqual([runsOf[testA]![3]]);
    expect(await ids(`?test=${testA}&folder=f2`)).toEqual([]);
    expect(await ids(`?test=${testC}&folder=f2&status=passed`)).toEqual([runsOf[testC]![0]]);
    const failedA = runsOf[testA]!.filter((id) => id !== runsOf[testA]![3]);
    expect(await ids(`?test=${testA}&folder=f1&status=failed&limit=5&offset=20`)).toEqual(
      newestFirst(failedA).slice(20, 25),
    );
  });

  test('an unknown query parameter is a 400 naming it (a misspelt filter never lists everything)', async () => {
    const before = await scanTable('runs');
    const takes = 'limit, offset, test, folder, status, media, steps, flaky, healed, cursor';
    for (const [q, named] of [
      [`?limit=3&stauts=passed`, '"stauts"'],
      [`?tset=${testA}&colour=blue`, '"tset", "colour"'],
      ['?constructor=1', '"constructor"'],
    ] as const) {
      const res = await call(h, 'GET', `/run${q}`, { headers: client(org) });
      expect([q, res.status, res.body]).toEqual([
        q,
        400,
        { error: `invalid query: unknown parameter ${named} (GET /run takes ${takes})` },
      ]);
    }
    expect(await scanTable('runs')).toEqual(before);
    // Spelt right, the same filter lists only its runs.
    expect(await ids('?limit=3&status=passed')).toEqual(
      newestFirst([runsOf[testB]![0]!, runsOf[testC]![0]!]),
    );
  });

  test('queries the index of exactly the filtered runs backwards and never scans', async () => {
    const client_ = ddb();
    const spy = jest.spyOn(client_, 'send');
    try {
      const cases: [string, string, string][] = [
        [`?test=${testA}&folder=f1&status=failed`, 'listTestStatus', `${org.orgId}#${testA}#failed`],
        ['?folder=f1&status=passed', 'listFolderStatus', `${org.orgId}#f1#passed`],
        ['?status=running', 'listStatus', `${org.orgId}#running`],
        ['', 'listOrg', org.orgId],
      ];
      for (const [q, index, key] of cases) {
        spy.mockClear();
        await list(q);
        const inputs = spy.mock.calls.map((c) => (c[0] as any).input);
        const names = spy.mock.calls.map((c) => (c[0] as any).constructor.name);
        expect(names.filter((n) => n === 'ScanCommand')).toEqual([]);
        const queries = inputs.filter((i) => i.IndexName !== undefined);
        expect(queries.length).toBeGreaterThan(0);
        for (const input of queries) {
          // The listing index, or the page index beside it (same keys, carrying what a page shows).
          expect([index, index.replace(/^list/, 'page')]).toContain(input.IndexName);
          expect(input).toMatchObject({
            ScanIndexForward: false,
            ExpressionAttributeValues: { ':k': key },
          });
        }
      }
    } finally {
      spy.mockRestore();
    }
  });

  test.each([
    ['limit=0', 'limit: must be an integer from 1 to 100'],
    ['limit=101', 'limit: must be an integer from 1 to 100'],
    ['limit=abc', 'limit: must be an integer from 1 to 100'],
    ['limit=1.5', 'limit: must be an integer from 1 to 100'],
    ['limit=-1', 'limit: must be an integer from 1 to 100'],
    ['limit=', 'limit: must be an integer from 1 to 100'],
    ['offset=-1', 'offset: must be an integer >= 0'],
    ['offset=1e3', 'offset: must be an integer >= 0'],
    ['status=done', 'status: must be pending, running, passed or failed'],
    ['media=yes', 'media: must be true or false'],
    ['steps=1', 'steps: must be true or false'],
    ['test=a.b', 'test: must be an id of letters, digits, - or _'],
    ['folder=a%20b', 'folder: must be an id of letters, digits, - or _'],
  ])('%s is 400 naming the parameter', async (q, error) => {
    const res = await call(h, 'GET', `/run?${q}`, { headers: client(org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: `invalid query: ${error}` });
  });

  test('limit=100 and limit=1 are accepted', async () => {
    expect(await ids('?limit=100')).toHaveLength(30);
    expect(await ids('?limit=1')).toEqual([created[created.length - 1]]);
  });
});
