import { beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { finishRun } from '../../../functions/core/runs/lifecycle.js';
import { loadRun, type RunItem, type RunStatus } from '../../../functions/core/runs/store.js';
import { keys } from '../../../functions/manifest/tables.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { seedRuns, storedRun } from '../../support/run-items.js';

/*
 * GET /run?flaky=true through real HTTP: only the runs that passed after a failed attempt, read
 * from the sparse `listFlaky` index, alone or with test, folder and status (applied by the Query), paged by
 * offset and by the Link cursor, never another org's; `flaky=maybe` is a 400. Runs are seeded straight
 * into the table with the key builders, a flaky one with `flakyKey` as `finishRun` writes it.
 */

const h = localServerForFile();
let org: OrgCredentials;
let other: OrgCredentials;

const FOLDER_OF: Record<string, string> = { t0: 'fA', t1: 'fA', t2: 'fB', t3: 'fB' };
const tests = Object.keys(FOLDER_OF);
const base = Date.parse('2026-04-01T00:00:00.000Z');

function runItem(orgId: string, i: number, status: RunStatus, flaky: boolean, prefix = 'fl'): RunItem {
  const runId = `${prefix}${String(i).padStart(5, '0')}`;
  const testId = tests[i % 4]!;
  const createdAt = new Date(base + i * 1000).toISOString();
  return {
    ...storedRun({ orgId, runId, testId, folderId: FOLDER_OF[testId]!, status, createdAt }),
    ...(flaky ? { flaky: true, flakyKey: keys.runs.flaky(orgId), attempts: [] } : {}),
  };
}

const seed = seedRuns;

/** 300 runs, every 7th one flaky if it passed (34 of them, most of the table not): newest first when listed. */
const seeded: RunItem[] = [];
beforeAll(async () => {
  org = await h.newOrg('flaky-listing');
  other = await h.newOrg('flaky-listing-other');
  for (let i = 0; i < 300; i++) {
    const status: RunStatus = i % 5 === 4 ? 'failed' : 'passed';
    seeded.push(runItem(org.orgId, i, status, status === 'passed' && i % 7 === 0));
  }
  await seed(seeded);
  // Another org's flaky runs of the same test ids: never in this org's answers.
  await seed([0, 1, 2, 3].map((i) => runItem(other.orgId, 1000 + i, 'passed', true, 'other')));
}, 60_000);

const flakyIds = (f: { testId?: string; folderId?: string; status?: RunStatus } = {}) =>
  seeded
    .filter(
      (r) =>
        r.flaky === true &&
        (f.testId === undefined || r.testId === f.testId) &&
        (f.folderId === undefined || r.folder.id === f.folderId) &&
        (f.status === undefined || r.status === f.status),
    )
    .map((r) => r.runId)
    .reverse();

const get = (path: string, who: OrgCredentials = org) => call(h, 'GET', path, { headers: client(who) });

/** Every run id of a listing, following its Link headers from `path`. */
async function followAll(path: string): Promise<string[]> {
  const ids: string[] = [];
  let next: string | undefined = path;
  for (let pages = 0; next !== undefined; pages++) {
    expect(pages).toBeLessThan(100);
    const res = await get(next);
    expect(res.status).toBe(200);
    ids.push(...(res.body as { id: string }[]).map((r) => r.id));
    const link = res.headers.get('link');
    const url = link === null ? undefined : new URL(/^<([^>]+)>; rel="next"$/.exec(link)![1]!);
    next = url && `${url.pathname}${url.search}`;
  }
  return ids;
}

describe('GET /run?flaky=true', () => {
  test('answers only the flaky runs, newest first, each saying metadata.flaky', async () => {
    const res = await get('/run?flaky=true&limit=100');
    expect(res.status).toBe(200);
    const runs = res.body as { id: string; status: string; metadata: Record<string, unknown> }[];
    expect(flakyIds().length).toBe(34);
    expect(runs.map((r) => r.id)).toEqual(flakyIds());
    for (const run of runs) {
      expect(run.status).toBe('passed');
      expect(run.metadata.flaky).toBe(true);
    }
  });

  test.each([
    ['test', { testId: 't1' }, 'test=t1'],
    ['folder', { folderId: 'fB' }, 'folder=fB'],
    ['status passed', { status: 'passed' as const }, 'status=passed'],
    [
      'test+folder+status',
      { testId: 't2', folderId: 'fB', status: 'passed' as const },
      'test=t2&folder=fB&status=passed',
    ],
    ['status failed (none: a flaky run passed)', { status: 'failed' as const }, 'status=failed'],
    ['test+other folder (none)', { testId: 't0', folderId: 'fB' }, 'test=t0&folder=fB'],
  ])(
    'with %s: the flaky runs among those the filter selects',
    async (_name, f, q) => {
      const all = await get(`/run?flaky=true&${q}&limit=100`);
      expect(all.status).toBe(200);
      expect((all.body as { id: string }[]).map((r) => r.id)).toEqual(flakyIds(f));
      // Offset pages of 3 and the Link cursor of pages of 2 answer the same runs, no duplicate, no gap.
      const byOffset: string[] = [];
      for (let offset = 0; offset <= flakyIds(f).length; offset += 3) {
        const page = await get(`/run?flaky=true&${q}&limit=3&offset=${offset}`);
        byOffset.push(...(page.body as { id: string }[]).map((r) => r.id));
      }
      expect(byOffset).toEqual(flakyIds(f));
      expect(await followAll(`/run?flaky=true&${q}&limit=2`)).toEqual(flakyIds(f));
    },
    60_000,
  );

  test('with steps=true the runs are read whole, still only the flaky ones', async () => {
    const res = await get('/run?flaky=true&test=t3&steps=true&limit=100');
    expect(res.status).toBe(200);
    expect((res.body as { id: string }[]).map((r) => r.id)).toEqual(flakyIds({ testId: 't3' }));
    for (const run of res.body as { steps: unknown[]; metadata: Record<string, unknown> }[]) {
      expect(run.steps).toEqual([]);
      expect(run.metadata.flaky).toBe(true);
    }
  });

  test("never another organization's flaky runs", async () => {
    const mine = await followAll('/run?flaky=true&limit=50');
    expect(mine.some((id) => id.startsWith('other'))).toBe(false);
    const theirs = await get('/run?flaky=true&limit=100', other);
    expect((theirs.body as { id: string }[]).map((r) => r.id).sort()).toEqual([
      'other01000',
      'other01001',
      'other01002',
      'other01003',
    ]);
  });

  test('flaky=false is every run, as without it', async () => {
    const without = await get('/run?limit=30');
    const withFalse = await get('/run?flaky=false&limit=30');
    expect(withFalse.status).toBe(200);
    expect(withFalse.body).toEqual(
      (without.body as Record<string, unknown>[]).map((r) => ({ ...r, report_url: expect.any(String) })),
    );
  });

  test.each(['maybe', 'TRUE', '1', ''])(
    'flaky=%p is a 400 naming flaky, and changes nothing',
    async (value) => {
      const before = await followAll('/run?flaky=true&limit=100');
      const res = await get(`/run?flaky=${encodeURIComponent(value)}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: expect.stringMatching(/flaky/) });
      expect(res.body.error).toMatch(/must be true or false/);
      expect(await followAll('/run?flaky=true&limit=100')).toEqual(before);
    },
  );

  test('a cursor of the flaky listing is refused by the same filter without flaky (400)', async () => {
    const res = await get('/run?flaky=true&limit=2');
    const link = res.headers.get('link');
    expect(link).toMatch(/flaky=true/);
    const cursor = new URL(/^<([^>]+)>/.exec(link!)![1]!).searchParams.get('cursor')!;
    const bad = await get(`/run?limit=2&cursor=${cursor}`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/cursor/);
  });

  test('finishRun of a flaky run writes flakyKey, so the run joins the listing', async () => {
    const running = { ...runItem(org.orgId, 5000, 'running', false), attempt: 'attempt-1' };
    await seed([running]);
    await finishRun(running, 'attempt-1', { status: 'passed', steps: [], attempts: [], flaky: true });
    expect((await loadRun(running.runId))?.flakyKey).toBe(keys.runs.flaky(org.orgId));
    const res = await get('/run?flaky=true&limit=1');
    expect((res.body as { id: string }[])[0]?.id).toBe(running.runId);
    // A run that passed first time gets no key: the index stays sparse.
    const plain = { ...runItem(org.orgId, 5001, 'running', false), attempt: 'attempt-1' };
    await seed([plain]);
    await finishRun(plain, 'attempt-1', { status: 'passed', steps: [], attempts: [], flaky: false });
    expect((await loadRun(plain.runId))?.flakyKey).toBeUndefined();
    expect(((await get('/run?flaky=true&limit=1')).body as { id: string }[])[0]?.id).toBe(running.runId);
  });
});
