/**
 * `npm run bench:startup`: how long `npm start` takes to answer /healthz (target: ≤ 1.5 s
 * median). Each run spawns the README's command, `npm start`, with a fresh PREVIEW_DATA_DIR in a temp dir
 * (a first start: tables, credentials and webhook secret are created) on a free PORT, and times it from
 * the spawn to the first 200 from /healthz; then stops it with SIGTERM and waits for it to exit.
 *
 * The target is absolute (1.5 s), so the figure is the plain median in seconds. Because this machine is
 * shared and noisy, the same run also measures, in alternation with it, a baseline: `node --import tsx`
 * of a bare `node:http` server answering /healthz (test/bench/startup-floor.ts). That is the floor of
 * the same toolchain (Node, the tsx loader, a listening socket) with none of the service, so
 * `npm start ÷ floor` says how far the service is from free whatever the machine's load; it is printed
 * beside the figure. `node --import tsx bin/start.ts` (no npm) is measured too, to show npm's own share.
 *
 * BENCH_STARTUP_RUNS (default 7) runs of each. Exit 1 when the median misses the target.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../support/process.js';
import { median, reportFigure } from './report.js';

const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 7);
const TARGET_S = 1.5;
const REPO_ROOT = resolve(new URL('../..', import.meta.url).pathname);

/** The status of GET /healthz, or 0 when nothing answers (yet). */
function healthz(port: number): Promise<number> {
  return new Promise((ok) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', timeout: 1_000 }, (res) => {
      res.resume();
      ok(res.statusCode ?? 0);
    });
    req.once('error', () => ok(0));
    req.once('timeout', () => {
      req.destroy();
      ok(0);
    });
    req.end();
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Spawn `command`, time it to the first 200 from /healthz (ms), stop it, wait for its exit. */
async function timeToHealthy(command: string, args: string[]): Promise<number> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-start-'));
  let stderr = '';
  const started = performance.now();
  const child: ChildProcess = spawn(command, args, {
    cwd: REPO_ROOT,
    // Its own process group, so the stop reaches node under npm as well.
    detached: true,
    env: {
      ...process.env,
      PORT: String(port),
      PREVIEW_DATA_DIR: dataDir,
      PREVIEW_WORK_DIR: join(dataDir, 'work'),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (c: Buffer) => {
    stderr += c;
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    while (performance.now() - started < 60_000) {
      if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}: ${stderr}`);
      if ((await healthz(port)) === 200) return performance.now() - started;
      await sleep(5);
    }
    throw new Error(`${command} ${args.join(' ')}: no 200 from /healthz within 60 s: ${stderr}`);
  } finally {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const subjects = {
  'npm start': ['npm', ['start', '--silent']],
  'node --import tsx bin/start.ts': [process.execPath, ['--import', 'tsx', 'bin/start.ts']],
  'floor: node --import tsx of a bare /healthz server': [
    process.execPath,
    ['--import', 'tsx', 'test/bench/startup-floor.ts'],
  ],
} as const satisfies Record<string, readonly [string, readonly string[]]>;
type Subject = keyof typeof subjects;

const times: Record<Subject, number[]> = {
  'npm start': [],
  'node --import tsx bin/start.ts': [],
  'floor: node --import tsx of a bare /healthz server': [],
};
// One unmeasured start of each (tsx's transform cache, the OS page cache), then alternating runs.
for (const [command, args] of Object.values(subjects)) await timeToHealthy(command, [...args]);
for (let run = 1; run <= RUNS; run++) {
  for (const [name, [command, args]] of Object.entries(subjects) as [Subject, (typeof subjects)[Subject]][]) {
    const ms = await timeToHealthy(command, [...args]);
    times[name].push(ms);
    console.log(`run ${run} ${name.padEnd(50)} ${ms.toFixed(0).padStart(6)} ms`);
  }
}

const stats = (xs: number[]) =>
  `median ${median(xs).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`;
for (const name of Object.keys(times) as Subject[]) console.log(`${name.padEnd(50)} ${stats(times[name])}`);

const npmStart = median(times['npm start']) / 1000;
const floor = median(times['floor: node --import tsx of a bare /healthz server']) / 1000;
const direct = median(times['node --import tsx bin/start.ts']) / 1000;
const ok = npmStart <= TARGET_S;
reportFigure({
  name: '`npm start` → /healthz 200 (median, absolute)',
  measured: Math.round(npmStart * 100) / 100,
  target: `≤ ${TARGET_S} s`,
  ok,
  unit: 's',
  detail:
    `${stats(times['npm start'])} over ${RUNS} fresh data dirs; ${(npmStart / floor).toFixed(2)}× the ` +
    `floor (node --import tsx of a bare /healthz server, ${floor.toFixed(2)} s, same run); ` +
    `without npm ${direct.toFixed(2)} s`,
});
process.exitCode = ok ? 0 : 1;
