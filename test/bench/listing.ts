/**
 * `npm run bench:listing`: GET /run stays flat in table size. The p50 latency of each
 * filter the API allows (none, test, folder, status, their pairs, all three), of filters that match
 * nothing, of an `offset=4000` skip and of a cursor page, at 500 runs and at 50,000 runs of one org;
 * each figure is the ratio p50 at 50,000 / p50 at 500, target ≤ 1.5×.
 *
 * The offset skip is the exception: a table of 500 runs has no 4,000 runs to skip (it answers `[]` after
 * reading 500 keys), so its ratio is taken against a table of 5,000 runs, the smallest that has them;
 * its line gives the 500-run figure too. The cursor page starts 400 runs deep at 500 and 40,000 runs deep
 * at 50,000 (a cursor page costs O(limit) however deep it is); its cursor is made by `encodeRunCursor`,
 * as the server makes those of its Link headers.
 *
 * Three local servers (`startLocal`, dynalite), each in a child process with its own data dir, hold
 * 500, 5,000 and 50,000 runs of their org, written straight into the table with BatchWriteItem through the
 * key builders (`keys.runs.indexKeys`, as `startRun` writes them), each run with 5 steps like a real one.
 * 6 tests in 3 folders; 60% passed, 30% failed, 7% running, 3% pending; test t0 has no pending run.
 * Requests go one at a time over HTTP, round by round: each round asks every case of every server once,
 * in a shuffled order (BENCH_LISTING_REQUESTS rounds, default 100, after 5 unmeasured), so the noise of
 * this shared machine falls on both sides of every ratio alike.
 * Every answer is checked (200, the expected number of runs). Exit 1 when a target is missed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { encodeRunCursor, type RunFilters } from '../../functions/core/runs/listing.js';
import type { RunItem, RunStatus } from '../../functions/core/runs/store.js';
import { keys } from '../../functions/manifest/tables.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { setLogSink } from '../../functions/shared/log.js';
import { startLocal } from '../../lib/local/server.js';
import { client } from '../support/api.js';
import { median, reportFigure } from './report.js';

const ROUNDS = Number(process.env.BENCH_LISTING_REQUESTS ?? 100);
const WARMUP = 5;
const TARGET = 1.5;

const FOLDER_OF: Record<string, string> = { t0: 'fA', t1: 'fA', t2: 'fB', t3: 'fB', t4: 'fC', t5: 'fC' };
const TESTS = Object.keys(FOLDER_OF);
const base = Date.parse('2026-01-01T00:00:00.000Z');

/** The i-th run: its test, and a status from a fixed mix (t0 never `pending`). */
function runOf(orgId: string, i: number): RunItem {
  const runId = `benchrun${String(i).padStart(6, '0')}`;
  const testId = TESTS[i % TESTS.length]!;
  const folderId = FOLDER_OF[testId]!;
  const roll = (i * 7919) % 100;
  let status: RunStatus = roll < 60 ? 'passed' : roll < 90 ? 'failed' : roll < 97 ? 'running' : 'pending';
  if (testId === 't0' && status === 'pending') status = 'failed';
  const createdAt = new Date(base + i * 1000).toISOString();
  return {
    runId,
    orgId,
    testId,
    name: `bench test ${testId}`,
    status,
    createdAt,
    folder: { id: folderId, name: `folder ${folderId}` },
    source: 'api',
    variables: {},
    steps: Array.from({ length: 5 }, (_, s) => ({
      id: `step${s}`,
      instruction: `Click the button number ${s} on the checkout page`,
      interaction: 'click',
      url: 'https://shop.example/checkout',
      element: {
        html: `<button class="primary" data-step="${s}">${'Pay now '.repeat(20)}</button>`,
        selector: `#b${s}`,
      },
      output: status === 'passed' ? 'clicked' : '',
      status: status === 'passed' ? 'passed' : 'skipped',
    })),
    ...keys.runs.indexKeys({ orgId, runId, testId, folderId, status, createdAt }),
  };
}

/** Write runs [from, to) with BatchWriteItem, 4 batches in flight. */
async function seed(orgId: string, from: number, to: number): Promise<RunItem[]> {
  const items: RunItem[] = [];
  for (let i = from; i < to; i++) items.push(runOf(orgId, i));
  const batches: RunItem[][] = [];
  for (let i = 0; i < items.length; i += 25) batches.push(items.slice(i, i + 25));
  const worker = async () => {
    for (let batch = batches.shift(); batch; batch = batches.shift()) {
      let requests = batch.map((Item) => ({ PutRequest: { Item } }));
      while (requests.length) {
        const res = await ddb().send(new BatchWriteCommand({ RequestItems: { [table('runs')]: requests } }));
        requests = (res.UnprocessedItems?.[table('runs')] ?? []) as typeof requests;
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return items;
}

interface Case {
  name: string;
  filters: RunFilters;
  /** Extra query parameters (offset, limit). */
  extra?: (stage: Stage) => Record<string, string>;
  /** Only measured at these stages. */
  stages?: number[];
}
interface Stage {
  size: number;
  runs: RunItem[];
  orgId: string;
}

const CASES: Case[] = [
  { name: 'none', filters: {} },
  { name: 'test', filters: { testId: 't1' } },
  { name: 'folder', filters: { folderId: 'fB' } },
  { name: 'status', filters: { status: 'failed' } },
  { name: 'test+status', filters: { testId: 't1', status: 'failed' } },
  { name: 'folder+status', filters: { folderId: 'fA', status: 'failed' } },
  { name: 'test+folder', filters: { testId: 't2', folderId: 'fB' } },
  { name: 'test+folder+status', filters: { testId: 't2', folderId: 'fB', status: 'passed' } },
  { name: 'no match: test+status', filters: { testId: 't0', status: 'pending' } },
  { name: 'no match: test+other folder', filters: { testId: 't0', folderId: 'fC' } },
  { name: 'no match: unknown folder', filters: { folderId: 'nosuchfolder' } },
  { name: 'offset=4000', filters: {}, extra: () => ({ offset: '4000' }), stages: [500, 5000, 50000] },
  {
    name: 'cursor page',
    filters: {},
    extra: (stage) => {
      // The cursor after the run 400 (at 500) or 40,000 (at 50,000) runs from the newest.
      const depth = stage.size >= 50_000 ? 40_000 : 400;
      const run = stage.runs[stage.runs.length - depth]!;
      return { cursor: encodeRunCursor(stage.orgId, {}, run.createdKey) };
    },
  },
];

const STAGES = [500, 5000, 50000];
const measuredAt = (c: Case) => c.stages ?? [500, 50000];

function pathOf(c: Case, stage: Stage): string {
  const q = new URLSearchParams(c.extra?.(stage) ?? {});
  if (c.filters.testId) q.set('test', c.filters.testId);
  if (c.filters.folderId) q.set('folder', c.filters.folderId);
  if (c.filters.status) q.set('status', c.filters.status);
  const s = q.toString();
  return `/run${s ? `?${s}` : ''}`;
}

/** How many runs the page must hold (20 newest of the filtered runs after the skip, or after the cursor). */
function expectedCount(c: Case, stage: Stage): number {
  const f = c.filters;
  const matching = stage.runs.filter(
    (r) =>
      (f.testId === undefined || r.testId === f.testId) &&
      (f.folderId === undefined || r.folder.id === f.folderId) &&
      (f.status === undefined || r.status === f.status),
  ).length;
  const extra = c.extra?.(stage) ?? {};
  if (extra.offset) return Math.max(0, Math.min(20, matching - Number(extra.offset)));
  if (extra.cursor) return Math.min(20, stage.size >= 50_000 ? 40_000 - 1 : 400 - 1);
  return Math.min(20, matching);
}

/** A child process serving one local server seeded with `size` runs (see `serve`). */
interface Server {
  size: number;
  url: string;
  orgId: string;
  headers: Record<string, string>;
  runs: RunItem[];
  child: ChildProcess;
}

/**
 * Child mode (`--serve N`): a local server with its own data dir and N runs of its org; prints one
 * `READY {url, credentials, seconds}` line and serves until its stdin closes.
 */
async function serve(size: number): Promise<void> {
  const logFd = openSync('/dev/null', 'w');
  setLogSink((line) => {
    writeSync(logFd, `${line}\n`);
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-listing-'));
  const service = await startLocal({ dataDir, port: 0 });
  const stop = async () => {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
    closeSync(logFd);
    process.exit(0);
  };
  process.stdin.on('end', stop);
  process.stdin.resume();
  const started = Date.now();
  await seed(service.credentials.orgId, 0, size);
  const seconds = (Date.now() - started) / 1000;
  console.log(`READY ${JSON.stringify({ url: service.url, credentials: service.credentials, seconds })}`);
}

/** Start a child server of `size` runs; resolves once it is seeded. */
function startServer(size: number): Promise<Server> {
  const script = new URL(import.meta.url).pathname;
  const child = spawn(process.execPath, ['--import', 'tsx', script, '--serve', String(size)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((ok, fail) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk;
      const line = out.split('\n').find((l) => l.startsWith('READY '));
      if (!line) return;
      child.stdout!.removeAllListeners('data');
      const ready = JSON.parse(line.slice(6)) as {
        url: string;
        credentials: OrgCredentials;
        seconds: number;
      };
      console.log(
        `server of ${size.toLocaleString('en')} runs ready (seeded in ${ready.seconds.toFixed(1)} s)`,
      );
      const orgId = ready.credentials.orgId;
      const runs = Array.from({ length: size }, (_, i) => runOf(orgId, i));
      ok({ size, url: ready.url, orgId, headers: client(ready.credentials), runs, child });
    });
    child.once('exit', (code) => fail(new Error(`the server of ${size} runs exited ${code}`)));
  });
}

if (process.argv[2] === '--serve') {
  await serve(Number(process.argv[3]));
} else {
  const servers: Server[] = [];
  try {
    // Seeded one after the other (the 50,000 dominate), then measured side by side.
    for (const size of STAGES) servers.push(await startServer(size));
    const bySize = new Map(servers.map((s) => [s.size, s]));
    const jobs = CASES.flatMap((c) => measuredAt(c).map((size) => ({ c, server: bySize.get(size)! })));
    const times = new Map<(typeof jobs)[number], number[]>(jobs.map((j) => [j, []]));
    // Round by round, every case at every size: noise of this shared machine falls on all of them alike.
    // Each round in its own order (a fixed seed), so no case always follows the same other one.
    let seedState = 14;
    const random = () => {
      seedState = (seedState * 1103515245 + 12345) % 2 ** 31;
      return seedState / 2 ** 31;
    };
    for (let round = 0; round < WARMUP + ROUNDS; round++) {
      const order = jobs.map((job) => ({ job, key: random() })).sort((a, b) => a.key - b.key);
      for (const { job } of order) {
        const stage: Stage = { size: job.server.size, runs: job.server.runs, orgId: job.server.orgId };
        const path = pathOf(job.c, stage);
        const t0 = performance.now();
        const res = await fetch(`${job.server.url}${path}`, { headers: job.server.headers });
        const body = (await res.json()) as unknown[];
        const ms = performance.now() - t0;
        if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(body)}`);
        const want = expectedCount(job.c, stage);
        if (body.length !== want)
          throw new Error(`${path} at ${stage.size}: ${body.length} runs, expected ${want}`);
        if (round >= WARMUP) times.get(job)!.push(ms);
      }
    }
    const p50: Record<string, Record<number, number>> = {};
    for (const job of jobs) {
      p50[job.c.name] ??= {};
      p50[job.c.name]![job.server.size] = median(times.get(job)!);
    }
    report(p50);
  } finally {
    for (const s of servers) s.child.stdin!.end();
    await Promise.all(servers.map((s) => new Promise((done) => s.child.once('exit', done))));
  }
}

function report(p50: Record<string, Record<number, number>>): void {
  const fmt = (ms: number | undefined) => (ms === undefined ? '' : `${ms.toFixed(1)} ms`);
  console.log(
    `\n${'GET /run'.padEnd(30)}${'p50 at 500'.padStart(12)}${'at 5,000'.padStart(12)}${'at 50,000'.padStart(12)}  ratio`,
  );
  let allOk = true;
  for (const c of CASES) {
    const at = p50[c.name]!;
    const baseSize = c.name === 'offset=4000' ? 5000 : 500;
    const ratio = at[50000]! / at[baseSize]!;
    const ok = ratio <= TARGET;
    allOk &&= ok;
    console.log(
      `${c.name.padEnd(30)}${fmt(at[500]).padStart(12)}${fmt(at[5000]).padStart(12)}${fmt(at[50000]).padStart(12)}  ${ratio.toFixed(2)}×${ok ? '' : '  MISSED'}`,
    );
    const label = baseSize === 500 ? '50k/500' : '50k/5k';
    reportFigure({
      name: `listing ${c.name} ${label} p50`,
      measured: Math.round(ratio * 100) / 100,
      target: `≤ ${TARGET}×`,
      ok,
      unit: '×',
      detail:
        `p50 ${fmt(at[50000])} at 50,000 runs vs ${fmt(at[baseSize])} at ${baseSize.toLocaleString('en')}` +
        (baseSize !== 500 ? ` (${fmt(at[500])} at 500, where there are no 4,000 runs to skip)` : '') +
        ` (${ROUNDS} requests each, one at a time)`,
    });
  }
  process.exitCode = allOk ? 0 : 1;
}
