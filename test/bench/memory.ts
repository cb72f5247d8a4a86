/**
 * `npm run bench:memory`: the local server's memory under a steady mixed load.
 *
 * The server runs as its own process, exactly as `npm start` starts it (`node --import tsx bin/start.ts`,
 * without npm in between, so the RSS read is the server's own), on a fresh data dir and a free port. The
 * bench seeds an application, a test and RUNS failed runs of it (through the same use cases previewctl
 * uses, joined to the server's dynalite as previewctl is), then keeps CONCURRENCY request loops busy for
 * BENCH_MEMORY_MINUTES (default 10) minutes, cycling through: an environment status poll, the run listing
 * (GET /run, which queries an index), one run (GET /run/{id}), the secrets listing, a single-key secret
 * upsert (over a fixed set of KEYS keys, so the bundle keeps its size) and the environment listing. The
 * server's RSS (VmRSS of /proc/<pid>/status) is sampled every SAMPLE_S seconds.
 *
 * Target: RSS at the end ≤ 1.25 × RSS after the first minute. RSS saws up and down with the garbage
 * collector, so each side is the median of its samples: the last minute, and the 30 s up to the
 * one-minute mark (for BENCH_MEMORY_MINUTES < 2 the mark is half the run and the windows shrink to match).
 * Exit code 0 when it is met and no request failed, 1 otherwise.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApplication, type OrgCredentials } from '../../functions/core/applications/applications.js';
import { startRun } from '../../functions/core/runs/lifecycle.js';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import type { Workflows } from '../../functions/ports/workflows/port.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bootLocalRuntime, REPO_ROOT, serverInfoPath } from '../../lib/local/server.js';
import { freePort } from '../support/process.js';
import { median, reportFigure, runBench } from './report.js';

const MINUTES = Number(process.env.BENCH_MEMORY_MINUTES ?? 10);
const CONCURRENCY = Number(process.env.BENCH_MEMORY_CONCURRENCY ?? 8);
const SAMPLE_S = 2;
const RUNS = 30;
const KEYS = 50;
const TARGET_RATIO = 1.25;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const range = (kbs: number[]) => `${mb(Math.min(...kbs))}–${mb(Math.max(...kbs))}`;

/** Resident set size of a process, in KB. */
function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

setLogSink(() => {});
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-memory-'));
let server: ChildProcess | undefined;

/** `node --import tsx bin/start.ts` on `port` and the fresh data dir, once /healthz answers. */
async function startServer(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      PREVIEW_DATA_DIR: dataDir,
      PREVIEW_WORK_DIR: join(dataDir, 'work'),
      PREVIEW_GIT_ROOT: join(dataDir, 'repos'),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
  });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      await res.arrayBuffer();
      if (res.ok) return child;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`the server did not answer /healthz within 60 s: ${stderr}`);
}

/** An application, a test and RUNS failed runs of it, written as previewctl would (the server's dynalite). */
async function seed(orgId: string): Promise<{ applicationId: string; runIds: string[] }> {
  const info = JSON.parse(readFileSync(serverInfoPath(dataDir), 'utf8')) as { dynamodbEndpoint: string };
  const { adapters } = await bootLocalRuntime({ dataDir, dynamodbEndpoint: info.dynamodbEndpoint });
  try {
    const { applicationId } = await createApplication({ orgId, repoFullName: 'bench/memory' });
    const { tests } = await importTests(orgId, [
      {
        name: 'Memory bench',
        folder: { id: 'bench', name: 'Bench' },
        application_id: applicationId,
        application_version: { name: 'web', path: '/' },
        steps: [{ interaction: 'navigate', instruction: 'Open the home page', url: '/' }],
      },
    ]);
    // Runs that never start: their state machine "cannot be started", so each is stored `failed`.
    const notStarted: Workflows = {
      start: async () => {
        throw new Error('not started by the memory bench');
      },
      completeTask: async () => undefined,
      heartbeat: async () => false,
    };
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++)
      runIds.push(await startRun({ workflows: notStarted }, orgId, tests[0]!.id));
    return { applicationId, runIds };
  } finally {
    await adapters.stop();
  }
}

type Kind = 'status poll' | 'run listing' | 'run read' | 'secrets listing' | 'secret upsert' | 'env listing';

async function main(): Promise<boolean> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  server = await startServer(port);
  const pid = server.pid!;
  const org = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8')) as OrgCredentials;
  const { applicationId, runIds } = await seed(org.orgId);
  const bearer = { authorization: `Bearer ${org.apiKey}` };
  const client = { 'svc-client-id': org.clientId, 'svc-client-secret': org.clientSecret };

  const requests: [Kind, (i: number) => [string, RequestInit]][] = [
    ['status poll', () => ['/v1/preview/environments/bench/memory/1', { headers: bearer }]],
    ['run listing', (i) => [`/run?limit=${5 + (i % 20)}`, { headers: client }]],
    ['run read', (i) => [`/run/${runIds[i % runIds.length]}?steps=true`, { headers: client }]],
    ['secrets listing', () => [`/v1/preview/secrets/${applicationId}/web`, { headers: bearer }]],
    [
      'secret upsert',
      (i) => [
        `/v1/preview/secrets/${applicationId}/web/KEY_${i % KEYS}`,
        {
          method: 'PUT',
          headers: { ...bearer, 'content-type': 'application/json' },
          body: JSON.stringify({ value: `value ${i} ${'v'.repeat(i % 64)}` }),
        },
      ],
    ],
    ['env listing', () => ['/v1/preview/environments', { headers: bearer }]],
  ];
  // An environment nobody deployed answers 404: the poll still authenticates and reads its row.
  const expected: Record<Kind, number> = {
    'status poll': 404,
    'run listing': 200,
    'run read': 200,
    'secrets listing': 200,
    'secret upsert': 200,
    'env listing': 200,
  };
  const counts = new Map<Kind, number>(requests.map(([k]) => [k, 0]));
  const failures: string[] = [];
  const totalRequests = () => [...counts.values()].reduce((a, b) => a + b, 0);

  const durationMs = MINUTES * 60_000;
  const markMs = Math.min(60_000, durationMs / 2);
  const started = performance.now();
  const samples: { t: number; kb: number }[] = [{ t: 0, kb: rssKb(pid) }];
  let running = true;
  let next = 0; // one sequence over all loops, so every kind gets its share
  const loops = Array.from({ length: CONCURRENCY }, async () => {
    while (running) {
      const i = next++;
      const [kind, make] = requests[i % requests.length]!;
      const [path, init] = make(Math.floor(i / requests.length));
      try {
        const res = await fetch(`${base}${path}`, init);
        await res.arrayBuffer();
        if (res.status !== expected[kind]) failures.push(`${kind} ${path}: ${res.status}`);
      } catch (err) {
        failures.push(`${kind} ${path}: ${(err as Error).message}`);
      }
      counts.set(kind, counts.get(kind)! + 1);
    }
  });
  while (performance.now() - started < durationMs) {
    await sleep(SAMPLE_S * 1000);
    const t = performance.now() - started;
    samples.push({ t, kb: rssKb(pid) });
    if (samples.length % 5 === 0) {
      process.stdout.write(
        `  ${(t / 1000).toFixed(0).padStart(4)} s  RSS ${mb(samples.at(-1)!.kb).padStart(7)}  ${totalRequests()} requests\n`,
      );
    }
  }
  running = false;
  await Promise.all(loops);
  const elapsedMs = performance.now() - started;

  // Each mark is the median of a window of samples: the 30 s up to the one-minute mark, the last minute.
  const windowMs = Math.min(30_000, markMs / 2);
  const tailMs = Math.min(60_000, durationMs / 2);
  const markSamples = samples
    .filter((s) => s.t > markMs - windowMs && s.t <= markMs + 1_000)
    .map((s) => s.kb);
  const endSamples = samples.filter((s) => s.t >= elapsedMs - tailMs).map((s) => s.kb);
  const atMark = median(markSamples);
  const atEnd = median(endSamples);
  const peak = Math.max(...samples.map((s) => s.kb));
  const ratio = atEnd / atMark;
  const total = totalRequests();
  const ok = ratio <= TARGET_RATIO && failures.length === 0;

  const s = (ms: number) => `${(ms / 1000).toFixed(0)} s`;
  console.log(
    `\nmixed load, ${CONCURRENCY} loops, ${s(elapsedMs)}: ${total} requests (${(total / (elapsedMs / 1000)).toFixed(0)}/s)`,
  );
  for (const [kind, n] of counts) console.log(`  ${kind.padEnd(16)} ${String(n).padStart(8)}`);
  console.log(
    `RSS: start ${mb(samples[0]!.kb)}; median of the ${s(windowMs)} up to ${s(markMs)} ${mb(atMark)} ` +
      `(${range(markSamples)}); median of the last ${s(tailMs)} ${mb(atEnd)} (${range(endSamples)}); ` +
      `peak ${mb(peak)}; end / mark ${ratio.toFixed(3)}× (target ≤ ${TARGET_RATIO}×)`,
  );
  if (failures.length)
    console.log(`${failures.length} failed requests, e.g. ${failures.slice(0, 3).join('; ')}`);
  reportFigure({
    name: `server RSS, last minute of ${MINUTES} min of mixed load / first minute`,
    measured: Number(ratio.toFixed(3)),
    target: `≤ ${TARGET_RATIO}×`,
    ok,
    unit: '×',
    detail:
      `median ${mb(atEnd)} (${range(endSamples)}) in the last ${s(tailMs)} vs ${mb(atMark)} (${range(markSamples)}) ` +
      `in the ${s(windowMs)} up to ${s(markMs)}; start ${mb(samples[0]!.kb)}, peak ${mb(peak)}; ${total} requests ` +
      `(${[...counts].map(([k, n]) => `${n} ${k}`).join(', ')}), ${failures.length} failed`,
  });
  return ok;
}

await runBench(main, async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server!.once('exit', r));
    server.kill('SIGTERM');
    await Promise.race([exited, sleep(15_000)]);
    if (server.exitCode === null) server.kill('SIGKILL');
  }
  rmSync(dataDir, { recursive: true, force: true });
});
