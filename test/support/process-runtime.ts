import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect } from '@jest/globals';
import { ProcessRuntime } from '../../functions/ports/runtime/local/process.js';
import { bubblewrapUsable, type Isolation } from '../../functions/ports/runtime/local/sandbox.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../../functions/ports/runtime/port.js';
import { GitSourceHost } from '../../functions/ports/source-host/local-git.js';
import type { TaskOutcome } from '../../functions/ports/workflows/port.js';
import { alive, BUILD_JS, pidFileBuild, SERVER_JS, waitForBuildPid } from './apps.js';
import { makeRepo } from './git.js';

/*
 * The local process runtime on its own, for the tests of functions/ports/runtime/local/process.ts: a real
 * git source host over repositories on disk, real app processes, and a `complete` callback that records
 * how each task token ended. A test file calls `processRuntimeForFile()` once (its repositories, and every
 * runtime stopped after each test), then runs its blocks under `forEachIsolation`: plain processes
 * (isolation `none`) and bubblewrap sandboxes (`bwrap`: where it is usable, and always in CI, which
 * installs it). `sha` and `bigSha` are set when the file starts (live bindings: read them in a test).
 */

export const BWRAP_SKIP =
  bubblewrapUsable() || process.env.CI
    ? undefined
    : 'bubblewrap is not usable on this machine (apt-get install bubblewrap); CI runs it';
export const ISOLATIONS: Isolation[] = BWRAP_SKIP ? ['none'] : ['none', 'bwrap'];
/** The isolation of the runtimes the current block creates. */
let isolation: Isolation = 'none';

export const root = mkdtempSync(join(tmpdir(), 'process-runtime-'));
const gitRoot = join(root, 'git');
export const REPO = 'acme/shop';
export const ORG = 'org-rt';
export let sha: string;
/** A repository whose checkout takes a while (a teardown can land in the middle of it). */
export const BIG = 'acme/big';
export let bigSha: string;

export const WEB: AppSpec = { port: 3000, command: 'node server.js web', health: '/healthz' };

/** Where `git` is on PATH, as the sandbox finds it (undefined: none). */
export const gitBinary = () =>
  spawnSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).stdout.trim() || undefined;

/**
 * What a build or an app can see: `node probe.js` prints it (a build), `node probe.js serve` answers it on
 * $PORT (an app). `OTHER` and `PROJECT` (this checkout) name paths outside its working copy that it must
 * not see.
 */
export const PROBE_JS = `
const fs = require('fs');
const safe = (f, d) => { try { return f(); } catch { return d; } };
function probe() {
  const own = new Set(Object.entries(process.env).map(([k, v]) => k + '=' + v));
  const pids = safe(() => fs.readdirSync('/proc'), []).filter((p) => /^\\d+$/.test(p));
  const foreign = [];
  for (const p of pids)
    for (const e of safe(() => fs.readFileSync('/proc/' + p + '/environ', 'utf8'), '').split('\\0'))
      if (e && !own.has(e)) foreign.push(e);
  let wroteOutside = true;
  try { fs.writeFileSync('/usr/probe-was-here', 'x'); } catch { wroteOutside = false; }
  fs.writeFileSync('written-inside', 'x');
  return {
    root: safe(() => fs.readdirSync('/').sort(), []),
    pids: pids.length,
    foreign,
    home: process.env.HOME,
    shadow: safe(() => fs.readFileSync('/etc/shadow', 'utf8').length, null),
    tmp: safe(() => fs.readdirSync('/tmp'), []),
    other: safe(() => fs.readdirSync(process.env.OTHER), null),
    project: safe(() => fs.readdirSync(process.env.PROJECT), null),
    wroteOutside,
    marker: process.env.PREVIEW_RUNTIME_APP,
  };
}
if (process.argv[2] !== 'serve') { console.log(JSON.stringify(probe())); fs.writeFileSync('probe-build.json', JSON.stringify(probe())); }
else require('http').createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(probe()));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

// ---- task tokens: how (and how often) each one was completed -------------------------------------------

interface Slot {
  promise: Promise<TaskOutcome>;
  resolve: (o: TaskOutcome) => void;
  completions: number;
}
const slots = new Map<string, Slot>();
function slot(token: string): Slot {
  let s = slots.get(token);
  if (!s) {
    let resolve!: (o: TaskOutcome) => void;
    const promise = new Promise<TaskOutcome>((r) => {
      resolve = r;
    });
    s = { promise, resolve, completions: 0 };
    slots.set(token, s);
  }
  return s;
}
const complete = async (token: string, outcome: TaskOutcome) => {
  const s = slot(token);
  s.completions++;
  s.resolve(outcome);
};
/** How `token` was completed (fails the test if it is not within `ms`). */
export function outcomeOf(token: string, ms = 10_000): Promise<TaskOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`token ${token} was not completed within ${ms} ms`)), ms);
  });
  return Promise.race([slot(token).promise, timeout]).finally(() => clearTimeout(timer));
}
export const completions = (token: string) => slots.get(token)?.completions ?? 0;
let tokenSeq = 0;
export const newToken = () => `tok-${++tokenSeq}`;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Poll until `pid` is gone (a killed process may take a moment to be reaped). */
export async function gone(pid: number, ms = 3_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

// ---- runtimes: one per test (its own data dir), all stopped after each test ----------------------------

const runtimes: ProcessRuntime[] = [];
export const dataDirs = new Map<ProcessRuntime, string>();
export const strangers: ChildProcess[] = [];
export function newRuntime(dataDir = mkdtempSync(join(root, 'data-'))): ProcessRuntime {
  const runtime = new ProcessRuntime({
    dataDir,
    workDir: join(dataDir, 'work'),
    sourceHost: new GitSourceHost(gitRoot),
    complete,
    readyTimeoutMs: 5_000,
    isolation,
  });
  runtimes.push(runtime);
  dataDirs.set(runtime, dataDir);
  return runtime;
}

let prSeq = 0;
/** A target for a fresh environment (its own PR number) at `generation`. */
export const target = (generation = 1, pr = ++prSeq): RuntimeTarget => ({
  orgId: ORG,
  envKey: `${REPO}#${pr}`,
  repoFullName: REPO,
  prNumber: pr,
  generation,
});
export const at = (t: RuntimeTarget, generation: number): RuntimeTarget => ({ ...t, generation });
export const launch = (spec: AppSpec = WEB, vars: Record<string, string> = {}): AppLaunch[] => [
  { name: 'web', spec, vars, secretKeys: [] },
];

export async function build(
  runtime: ProcessRuntime,
  t: RuntimeTarget,
  spec: AppSpec = WEB,
): Promise<TaskOutcome> {
  const token = newToken();
  await runtime.build(t, sha, { web: spec }, token);
  return outcomeOf(token);
}
export async function awaitReady(runtime: ProcessRuntime, t: RuntimeTarget): Promise<TaskOutcome> {
  const token = newToken();
  await runtime.awaitReady(t, { web: WEB }, token);
  return outcomeOf(token);
}

/** Build, deploy and wait for readiness; returns the app's URL. */
export async function up(runtime: ProcessRuntime, t: RuntimeTarget, spec: AppSpec = WEB): Promise<string> {
  expect(await build(runtime, t, spec)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
  await runtime.deploy(t, launch(spec), { prune: true });
  const ready = await awaitReady(runtime, t);
  if (!ready.ok) throw new Error(`not ready: ${ready.cause}`);
  return (ready.output.urls as Record<string, string>).web!;
}
export const superseded = { name: 'Superseded' };
/**
 * Start a build of `web` that runs for `ms` (it writes its pid to `build.pid` in its working copy first:
 * the only place an isolated build can write) and wait until it runs. Returns its token, the build
 * process (its pid on this machine) and when it started.
 */
export async function startSlowBuild(runtime: ProcessRuntime, t: RuntimeTarget, ms = 3_000) {
  const file = `build-${newToken()}.pid`;
  const slow: AppSpec = { ...WEB, build: pidFileBuild(file, ms) };
  const token = newToken();
  const startedAt = Date.now();
  await runtime.build(t, sha, { web: slow }, token);
  const pid = await waitForBuildPid(workDir(runtime, t), file);
  return { token, pid, startedAt };
}
export const stateFile = (runtime: ProcessRuntime) => join(dataDirs.get(runtime)!, 'runtime', 'state.json');
/** The environment's working copies (`<workDir>/<org>/<owner>/<repo>/<pr>`). */
export const workDir = (runtime: ProcessRuntime, t: RuntimeTarget) =>
  join(dataDirs.get(runtime)!, 'work', ORG, ...t.repoFullName.split('/'), String(t.prNumber));

/** Make the file's repositories before its tests, stop every runtime after each, remove it all at the end. */
export function processRuntimeForFile(): void {
  beforeAll(() => {
    sha = makeRepo(gitRoot, REPO, {
      'server.js': SERVER_JS,
      'build.js': BUILD_JS,
      'probe.js': PROBE_JS,
      VERSION: 'v1',
    });
    const big: Record<string, string> = { 'server.js': SERVER_JS, VERSION: 'big' };
    for (let d = 0; d < 30; d++)
      for (let f = 0; f < 50; f++) big[`d${d}/f${f}.txt`] = `${d}-${f}-${'x'.repeat(3_000)}\n`;
    bigSha = makeRepo(gitRoot, BIG, big);
  });
  afterEach(async () => {
    await Promise.all(runtimes.splice(0).map((r) => r.stop()));
    for (const p of strangers.splice(0)) p.kill('SIGKILL');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));
}

/** `body` once per isolation, in a block `isolation <mode>` whose runtimes use it. */
export function forEachIsolation(body: (mode: Isolation) => void): void {
  describe.each(ISOLATIONS)('isolation %s', (mode) => {
    beforeAll(() => {
      isolation = mode;
    });
    afterAll(() => {
      isolation = 'none';
    });
    body(mode);
  });
}
