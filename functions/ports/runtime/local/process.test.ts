import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import {
  alive,
  BUILD_JS,
  hit,
  pidFileBuild,
  SERVER_JS,
  waitForBuildPid,
} from '../../../../test/support/apps.js';
import { makeRepo } from '../../../../test/support/git.js';
import { setLogSink } from '../../../shared/log.js';
import { MASK } from '../../../shared/masking/mask.js';
import { GitSourceHost } from '../../source-host/local-git.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../port.js';
import { runtimeContract } from '../runtime.contract.js';
import { ProcessRuntime } from './process.js';
import { bubblewrapUsable, type Isolation, SANDBOX_HOME, toolchainDir } from './sandbox.js';

/*
 * The local process runtime on its own: a real git source host over a repository on disk, real app
 * processes, and a `complete` callback that records how each task token ended. Everything runs twice:
 * plain processes (isolation `none`) and bubblewrap sandboxes (`bwrap`: where it is usable, and always in
 * CI, which installs it).
 */

const BWRAP_SKIP =
  bubblewrapUsable() || process.env.CI
    ? undefined
    : 'bubblewrap is not usable on this machine (apt-get install bubblewrap); CI runs it';
const ISOLATIONS: Isolation[] = BWRAP_SKIP ? ['none'] : ['none', 'bwrap'];
/** The isolation of the runtimes the current block creates. */
let isolation: Isolation = 'none';

const root = mkdtempSync(join(tmpdir(), 'process-runtime-'));
const gitRoot = join(root, 'git');
const REPO = 'acme/shop';
const ORG = 'org-rt';
let sha: string;
/** A repository whose checkout takes a while (a teardown can land in the middle of it). */
const BIG = 'acme/big';
let bigSha: string;

const WEB: AppSpec = { port: 3000, command: 'node server.js web', health: '/healthz' };

/** Where `git` is on PATH, as the sandbox finds it (undefined: none). */
const gitBinary = () =>
  spawnSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).stdout.trim() || undefined;

/**
 * What a build or an app can see: `node probe.js` prints it (a build), `node probe.js serve` answers it on
 * $PORT (an app). `OTHER` and `PROJECT` (this checkout) name paths outside its working copy that it must
 * not see.
 */
const PROBE_JS = `
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
function outcomeOf(token: string, ms = 10_000): Promise<TaskOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`token ${token} was not completed within ${ms} ms`)), ms);
  });
  return Promise.race([slot(token).promise, timeout]).finally(() => clearTimeout(timer));
}
const completions = (token: string) => slots.get(token)?.completions ?? 0;
let tokenSeq = 0;
const newToken = () => `tok-${++tokenSeq}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Poll until `pid` is gone (a killed process may take a moment to be reaped). */
async function gone(pid: number, ms = 3_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

// ---- runtimes: one per test (its own data dir), all stopped after each test ----------------------------

const runtimes: ProcessRuntime[] = [];
const dataDirs = new Map<ProcessRuntime, string>();
const strangers: ChildProcess[] = [];
function newRuntime(dataDir = mkdtempSync(join(root, 'data-'))): ProcessRuntime {
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

let prSeq = 0;
/** A target for a fresh environment (its own PR number) at `generation`. */
const target = (generation = 1, pr = ++prSeq): RuntimeTarget => ({
  orgId: ORG,
  envKey: `${REPO}#${pr}`,
  repoFullName: REPO,
  prNumber: pr,
  generation,
});
const at = (t: RuntimeTarget, generation: number): RuntimeTarget => ({ ...t, generation });
const launch = (spec: AppSpec = WEB, vars: Record<string, string> = {}): AppLaunch[] => [
  { name: 'web', spec, vars, secretKeys: [] },
];

async function build(runtime: ProcessRuntime, t: RuntimeTarget, spec: AppSpec = WEB): Promise<TaskOutcome> {
  const token = newToken();
  await runtime.build(t, sha, { web: spec }, token);
  return outcomeOf(token);
}
async function awaitReady(runtime: ProcessRuntime, t: RuntimeTarget): Promise<TaskOutcome> {
  const token = newToken();
  await runtime.awaitReady(t, { web: WEB }, token);
  return outcomeOf(token);
}

/** Build, deploy and wait for readiness; returns the app's URL. */
async function up(runtime: ProcessRuntime, t: RuntimeTarget, spec: AppSpec = WEB): Promise<string> {
  expect(await build(runtime, t, spec)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
  await runtime.deploy(t, launch(spec), { prune: true });
  const ready = await awaitReady(runtime, t);
  if (!ready.ok) throw new Error(`not ready: ${ready.cause}`);
  return (ready.output.urls as Record<string, string>).web!;
}
const superseded = { name: 'Superseded' };
/**
 * Start a build of `web` that runs for `ms` (it writes its pid to `build.pid` in its working copy first:
 * the only place an isolated build can write) and wait until it runs. Returns its token, the build
 * process (its pid on this machine) and when it started.
 */
async function startSlowBuild(runtime: ProcessRuntime, t: RuntimeTarget, ms = 3_000) {
  const file = `build-${newToken()}.pid`;
  const slow: AppSpec = { ...WEB, build: pidFileBuild(file, ms) };
  const token = newToken();
  const startedAt = Date.now();
  await runtime.build(t, sha, { web: slow }, token);
  const pid = await waitForBuildPid(workDir(runtime, t), file);
  return { token, pid, startedAt };
}
const stateFile = (runtime: ProcessRuntime) => join(dataDirs.get(runtime)!, 'runtime', 'state.json');
/** The environment's working copies (`<workDir>/<org>/<owner>/<repo>/<pr>`). */
const workDir = (runtime: ProcessRuntime, t: RuntimeTarget) =>
  join(dataDirs.get(runtime)!, 'work', ORG, ...t.repoFullName.split('/'), String(t.prNumber));

describe.each(ISOLATIONS)('isolation %s', (mode) => {
  beforeAll(() => {
    isolation = mode;
  });
  afterAll(() => {
    isolation = 'none';
  });

  runtimeContract(`ProcessRuntime (isolation ${mode})`, {
    runtime: () => newRuntime(),
    newToken,
    outcomeOf,
    target: (generation = 1) => target(generation),
    sha: () => sha,
    app: WEB,
  });

  describe('ProcessRuntime', () => {
    test('build → deploy → awaitReady completes with the URL, which answers from the built SHA', async () => {
      const runtime = newRuntime();
      const t = target();
      const buildToken = newToken();
      await runtime.build(t, sha, { web: WEB }, buildToken);
      expect(await outcomeOf(buildToken)).toEqual({ ok: true, output: { builds: expect.any(Object) } });

      await runtime.deploy(t, launch(WEB, { SHOW: 'GREETING', GREETING: 'hello' }), { prune: true });
      const readyToken = newToken();
      await runtime.awaitReady(t, { web: WEB }, readyToken);
      const ready = await outcomeOf(readyToken);
      const running = runtime.running(t, 'web')!;
      expect(ready).toEqual({ ok: true, output: { urls: { web: `http://127.0.0.1:${running.port}` } } });

      const answer = await hit(`http://127.0.0.1:${running.port}`);
      expect(answer).toMatchObject({ app: 'web', version: 'v1', env: { GREETING: 'hello' } });
      expect(alive(answer.pid)).toBe(true);
      // Each token ends exactly once.
      expect([completions(buildToken), completions(readyToken)]).toEqual([1, 1]);
      expect(readFileSync(runtime.logPath(t, 'web'), 'utf8')).toContain(`build ${sha.slice(0, 12)}`);
    }, 30_000);

    test('a deploy of an app with no build is refused with a DeployFailed naming the app', async () => {
      const runtime = newRuntime();
      const t = target();
      const refused = runtime.deploy(t, launch(), { prune: true });
      await expect(refused).rejects.toMatchObject({
        name: 'DeployFailed',
        message: expect.stringContaining('app web'),
      });
      expect(runtime.running(t, 'web')).toBeUndefined();
    });

    describe('generation fence', () => {
      test('after generation 2 is up, build/deploy/awaitReady of generation 1 are refused and change nothing', async () => {
        const runtime = newRuntime();
        const t1 = target(1);
        const t2 = at(t1, 2);
        await up(runtime, t1);
        const url = await up(runtime, t2);
        const before = await hit(url);
        const running = runtime.running(t2, 'web');
        const state = readFileSync(stateFile(runtime), 'utf8');
        const work = readdirSync(workDir(runtime, t2)).sort();

        const tokens = [newToken(), newToken()];
        await expect(runtime.build(t1, sha, { web: WEB }, tokens[0]!)).rejects.toMatchObject(superseded);
        await expect(runtime.deploy(t1, launch(), { prune: true })).rejects.toMatchObject(superseded);
        await expect(runtime.awaitReady(t1, { web: WEB }, tokens[1]!)).rejects.toMatchObject(superseded);
        await expect(runtime.teardown(t1)).rejects.toMatchObject(superseded);

        await sleep(300); // anything started in the background would have shown by now
        expect(tokens.map(completions)).toEqual([0, 0]); // a refused call never completes its token
        expect(await hit(url)).toEqual(before); // same process (pid), same build
        expect(runtime.running(t2, 'web')).toEqual(running);
        expect(readFileSync(stateFile(runtime), 'utf8')).toBe(state);
        expect(readdirSync(workDir(runtime, t2)).sort()).toEqual(work);
      }, 30_000);

      test.each([
        [
          'build',
          async (r: ProcessRuntime, t: RuntimeTarget) =>
            expect(await build(r, t)).toMatchObject({ ok: true }),
        ],
        ['deploy', (r: ProcessRuntime, t: RuntimeTarget) => r.deploy(t, launch(), { prune: true })],
        [
          'awaitReady',
          async (r: ProcessRuntime, t: RuntimeTarget) =>
            expect(await awaitReady(r, t)).toMatchObject({ ok: true }),
        ],
      ])(
        '%s for generation 2 alone raises the fence',
        async (_name, call) => {
          const runtime = newRuntime();
          const t1 = target(1);
          await up(runtime, t1);
          await call(runtime, at(t1, 2));
          const running = runtime.running(t1, 'web')!;
          const before = await hit(`http://127.0.0.1:${running.port}`);

          await expect(runtime.deploy(t1, launch(), { prune: true })).rejects.toMatchObject(superseded);
          await expect(runtime.build(t1, sha, { web: WEB }, newToken())).rejects.toMatchObject(superseded);
          expect(runtime.running(t1, 'web')).toEqual(running);
          expect(await hit(`http://127.0.0.1:${running.port}`)).toEqual(before);
        },
        30_000,
      );

      test('an awaitReady still waiting when a newer generation arrives ends Superseded', async () => {
        const runtime = newRuntime();
        const t1 = target(1);
        // Starts listening only after 2 s: generation 1's readiness check is still polling.
        const slow: AppSpec = {
          ...WEB,
          command: `node -e "setTimeout(()=>require('./server.js'),2000)" web`,
        };
        expect(await build(runtime, t1, slow)).toMatchObject({ ok: true });
        await runtime.deploy(t1, launch(slow), { prune: true });
        const token = newToken();
        await runtime.awaitReady(t1, { web: slow }, token);
        await sleep(200);
        expect(completions(token)).toBe(0);
        await runtime.awaitReady(at(t1, 2), { web: slow }, newToken());
        expect(await outcomeOf(token, 3_000)).toMatchObject({ ok: false, error: 'Superseded' });
      }, 30_000);
    });

    describe('build cancellation', () => {
      test.each([
        ['the same generation (an app rebuild)', 1],
        ['a newer generation', 2],
      ])(
        'a newer build of the same app from %s cancels the one in progress',
        async (_name, newer) => {
          const runtime = newRuntime();
          const t = target(1);
          const { token: slowToken, pid: buildPid, startedAt } = await startSlowBuild(runtime, t);
          expect(alive(buildPid)).toBe(true);

          const fast: AppSpec = { ...WEB, build: 'node build.js web' };
          const fastToken = newToken();
          await runtime.build(at(t, newer), sha, { web: fast }, fastToken);
          expect(await outcomeOf(slowToken)).toEqual({
            ok: false,
            error: 'Superseded',
            cause: expect.any(String),
          });
          expect(Date.now() - startedAt).toBeLessThan(3_000); // killed, not waited for
          expect(await gone(buildPid)).toBe(true);
          expect(await outcomeOf(fastToken)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
          expect([completions(slowToken), completions(fastToken)]).toEqual([1, 1]);

          // The newer build is what runs; the cancelled one's working copy is gone.
          await runtime.deploy(at(t, newer), launch(fast), { prune: true });
          expect(await awaitReady(runtime, at(t, newer))).toMatchObject({ ok: true });
          const answer = await hit(`http://127.0.0.1:${runtime.running(t, 'web')!.port}`);
          expect(answer.stamp).toEqual(expect.any(String)); // written by the fast build
          expect(readdirSync(workDir(runtime, t))).toHaveLength(1);
        },
        30_000,
      );

      test('any call of a newer generation cancels older builds, even of apps it does not build', async () => {
        // A newer commit may rename or drop every app: the old build must not run on regardless.
        const runtime = newRuntime();
        const t = target(1);
        const { token: slowToken, pid: buildPid, startedAt } = await startSlowBuild(runtime, t);
        const siteToken = newToken();
        await runtime.build(at(t, 2), sha, { site: { ...WEB, command: 'node server.js site' } }, siteToken);
        expect(await outcomeOf(slowToken)).toMatchObject({ ok: false, error: 'Superseded' });
        expect(Date.now() - startedAt).toBeLessThan(3_000);
        expect(await gone(buildPid)).toBe(true);
        expect(await outcomeOf(siteToken)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
      }, 30_000);

      test('a failing build fails its token with a DeployFailed naming the app and its output', async () => {
        const runtime = newRuntime();
        const spec: AppSpec = { ...WEB, build: `node -e "console.error('no left-pad'); process.exit(2)"` };
        const outcome = await build(runtime, target(), spec);
        expect(outcome).toEqual({
          ok: false,
          error: 'DeployFailed',
          cause: expect.stringMatching(
            /^app web: build `.*` failed \(exit code 2\); last output: no left-pad; full log: previewctl envs logs web --repo acme\/shop --pr \d+ --source build$/,
          ),
        });
      }, 30_000);
    });

    describe('teardown', () => {
      test('stops the app and refuses older generations afterwards', async () => {
        const runtime = newRuntime();
        const t1 = target(1);
        const url = await up(runtime, t1);
        const { pid } = await hit(url);
        const shellPid = runtime.running(t1, 'web')!.pid;

        await runtime.teardown(at(t1, 2));
        expect(await gone(pid)).toBe(true);
        expect(await gone(shellPid)).toBe(true);
        expect(await hit(url)).toBeUndefined();
        expect(runtime.running(t1, 'web')).toBeUndefined();
        expect(existsSync(workDir(runtime, t1))).toBe(false);

        await expect(runtime.build(t1, sha, { web: WEB }, newToken())).rejects.toMatchObject(superseded);
        await expect(runtime.deploy(t1, launch(), { prune: true })).rejects.toMatchObject(superseded);
        await expect(runtime.awaitReady(t1, { web: WEB }, newToken())).rejects.toMatchObject(superseded);
        await expect(runtime.teardown(t1)).rejects.toMatchObject(superseded);
        expect(runtime.running(t1, 'web')).toBeUndefined();
      }, 30_000);

      test('cancels a build in progress: its token ends Superseded and its process is gone', async () => {
        const runtime = newRuntime();
        const t1 = target(1);
        const { token, pid: buildPid } = await startSlowBuild(runtime, t1);
        await runtime.teardown(at(t1, 2));
        expect(alive(buildPid)).toBe(false); // teardown returns once the build has exited
        expect(await outcomeOf(token)).toMatchObject({ ok: false, error: 'Superseded' });
        // Nothing of the cancelled build is left to deploy from.
        await expect(runtime.deploy(at(t1, 2), launch(), { prune: true })).rejects.toMatchObject({
          name: 'DeployFailed',
        });
      }, 30_000);
    });

    describe('recover (after a restart over the same data dir)', () => {
      test('kills the app and build processes the previous instance left and returns how many', async () => {
        const dataDir = mkdtempSync(join(root, 'data-'));
        const first = newRuntime(dataDir);
        const tApp = target(1);
        const url = await up(first, tApp);
        const { pid: appPid } = await hit(url);
        const appShell = first.running(tApp, 'web')!.pid;

        const tBuild = target(1);
        const { pid: buildPid } = await startSlowBuild(first, tBuild, 10_000);

        // The environment's rebuilt outputs (build-cache.ts) are not an interrupted build's leftovers.
        mkdirSync(join(workDir(first, tApp), '.rebuilt', 'web', 'tree'), { recursive: true });
        // A new instance over the same data dir, the first one's children still running (a crash).
        const second = newRuntime(dataDir);
        expect(second.running(tApp, 'web')).toEqual(first.running(tApp, 'web'));
        expect(second.recover()).toBe(2);
        for (const pid of [appPid, appShell, buildPid]) expect(await gone(pid)).toBe(true);
        expect(await hit(url)).toBeUndefined();
        expect(second.running(tApp, 'web')).toBeUndefined();
        expect(second.recover()).toBe(0); // nothing left, and nothing recorded any more
        // The interrupted build's working copy is gone; the finished one stays.
        expect(readdirSync(workDir(second, tBuild))).toEqual([]);
        expect(readdirSync(workDir(second, tApp)).filter((e) => e !== '.rebuilt')).toHaveLength(1);
        expect(existsSync(join(workDir(second, tApp), '.rebuilt', 'web', 'tree'))).toBe(true);

        // Builds are kept: the app starts again from its build, under the same generation.
        await second.deploy(tApp, launch(), { prune: true });
        expect(await awaitReady(second, tApp)).toMatchObject({ ok: true });
      }, 30_000);

      test('never kills a live process recorded in the state that is not ours', async () => {
        const dataDir = mkdtempSync(join(root, 'data-'));
        const first = newRuntime(dataDir);
        const t = target(1);
        await up(first, t);
        const stranger = spawn(process.execPath, ['-e', 'setTimeout(()=>{},30000)'], { stdio: 'ignore' });
        strangers.push(stranger);
        await sleep(100);
        // The recorded pid now names a process that is not one of ours (as if the pid had been reused).
        const path = stateFile(first);
        const state = JSON.parse(readFileSync(path, 'utf8'));
        for (const env of Object.values<any>(state.envs))
          for (const app of Object.values<any>(env.apps)) if (app.running) app.running.pid = stranger.pid;
        writeFileSync(path, JSON.stringify(state));

        const second = newRuntime(dataDir);
        expect(second.recover()).toBe(0);
        expect(alive(stranger.pid!)).toBe(true);
      }, 30_000);
    });

    describe("what a failure quotes of an app's output (hardening: secret masking)", () => {
      test('an app that crashes printing a multi-line secret, its base64 and JSON forms: none is quoted', async () => {
        const runtime = newRuntime();
        const t = target();
        const pem = [
          '-----BEGIN PRIVATE KEY-----',
          'MIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEAq7BFUpkGp3+XQxyz',
          'dSkDnvmcp9lC3oSJ6nvO6WcwJRm4Vn5hY9cDy0Hdq2qOAP3Y7r2q8sY8mK6kbw1+',
          'vZ8JbQIDAQABAkBGt6Nq0qZV3VjH9lJeOmg0nJVCx9d6b3HqT8y1jS2c5k0JcS0d',
          '-----END PRIVATE KEY-----',
        ].join('\n');
        // The key whole, then base64, JSON-escaped, and its last lines alone (a partial print).
        const crash: AppSpec = {
          ...WEB,
          command:
            `node -e "const k = process.env.TLS_KEY; console.error('bad key:'); console.error(k); ` +
            `console.error(Buffer.from(k).toString('base64')); console.error(JSON.stringify({ key: k })); ` +
            `console.error(k.split(String.fromCharCode(10)).slice(2).join(String.fromCharCode(10))); ` +
            `console.error('giving up'); process.exit(3)"`,
        };
        expect(await build(runtime, t, crash)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
        await runtime.deploy(
          t,
          [{ name: 'web', spec: crash, vars: { TLS_KEY: pem }, secretKeys: ['TLS_KEY'] }],
          { prune: true },
        );
        const outcome = await awaitReady(runtime, t);
        expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
        const cause = (outcome as { cause: string }).cause;
        expect(cause).toMatch(/^app web exited \(exit code 3\) before it was ready; last output: /);
        expect(cause).toContain('giving up');
        expect(cause).toContain(MASK);
        const forms = [
          pem,
          Buffer.from(pem).toString('base64'),
          JSON.stringify(pem).slice(1, -1),
          ...pem.split('\n').slice(1, -1),
        ];
        // The log file itself holds none of them (masked as written, run confinement): the app's lines are
        // there, its secret is not.
        const file = readFileSync(runtime.logPath(t, 'web'), 'utf8');
        expect(file).toContain('giving up');
        expect(file).toContain(`bad key:\n${MASK}\n`);
        for (const form of forms) expect(file).not.toContain(form);
        for (const form of forms) expect(cause).not.toContain(form);
        for (const chunk of pem
          .split('\n')
          .slice(1, -1)
          .map((l) => l.slice(0, 16)))
          expect(cause).not.toContain(chunk);
      }, 30_000);

      test('the log files on disk never hold a secret value, even one the app writes in pieces', async () => {
        const runtime = newRuntime();
        const t = target();
        const secret = 'S3cr3t-v4lue/for+the-db';
        // The value in three writes 150 ms apart (three chunks for the runtime), then base64 and
        // URL-encoded; the server stays up (the file is read while the app runs).
        const leaky: AppSpec = {
          ...WEB,
          command:
            `node -e "const v = process.env.DB_PASSWORD; const w = (s) => process.stdout.write(s); ` +
            `w('pw=' + v.slice(0, 5)); setTimeout(() => w(v.slice(5, 12)), 150); ` +
            `setTimeout(() => { w(v.slice(12) + ' end' + String.fromCharCode(10)); ` +
            `console.error(Buffer.from(v).toString('base64'), encodeURIComponent(v)); }, 300); ` +
            `setTimeout(() => require('./server.js'), 400)" web`,
        };
        expect(await build(runtime, t, leaky)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
        await runtime.deploy(
          t,
          [{ name: 'web', spec: leaky, vars: { DB_PASSWORD: secret }, secretKeys: ['DB_PASSWORD'] }],
          { prune: true },
        );
        expect(await awaitReady(runtime, t)).toMatchObject({ ok: true });
        const file = readFileSync(runtime.logPath(t, 'web'), 'utf8');
        expect(file).toContain(`pw=${MASK} end\n${MASK} ${MASK}\n`);
        for (const form of [secret, Buffer.from(secret).toString('base64'), encodeURIComponent(secret)])
          expect(file).not.toContain(form);
        expect(file).not.toContain(secret.slice(0, 5));
        await runtime.teardown(t);
      }, 30_000);

      test('a failure quotes no path of this machine (data dir, work dir)', async () => {
        const runtime = newRuntime();
        const t = target();
        const spec: AppSpec = { ...WEB, build: 'pwd; ls -d "$PWD"/..; exit 4' };
        const outcome = await build(runtime, t, spec);
        expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
        const cause = (outcome as { cause: string }).cause;
        expect(cause).toContain('<work dir>/');
        expect(cause).not.toContain(dataDirs.get(runtime)!);
      }, 30_000);
    });

    describe('stopping an app', () => {
      test('is graceful: the app gets SIGTERM and time to finish before anything is killed', async () => {
        const runtime = newRuntime();
        const t = target();
        const graceful: AppSpec = {
          ...WEB,
          command: `node -e "process.on('SIGTERM', () => setTimeout(() => { console.log('drained after SIGTERM'); process.exit(0); }, 300)); require('./server.js')"`,
        };
        const url = await up(runtime, t, graceful);
        const { pid } = await hit(url);
        await runtime.teardown(at(t, 2));
        expect(await gone(pid)).toBe(true);
        expect(readFileSync(runtime.logPath(t, 'web'), 'utf8')).toContain('drained after SIGTERM');
      }, 30_000);
    });

    describe('a teardown racing a checkout (hardening)', () => {
      test('cancels the clone and waits for it: the teardown succeeds and no working copy is left', async () => {
        const runtime = newRuntime();
        for (let i = 0; i < 8; i++) {
          const t = { ...target(), repoFullName: BIG };
          const token = newToken();
          await runtime.build(t, bigSha, { web: WEB }, token);
          await sleep(i * 20); // from before the clone starts to well into the checkout
          await runtime.teardown(at(t, 2));
          expect(existsSync(workDir(runtime, t))).toBe(false);
          const outcome = await outcomeOf(token);
          expect(outcome.ok || (outcome as { error: string }).error === 'Superseded').toBe(true);
          // Nothing of the cancelled build comes back after the teardown either.
          await sleep(50);
          expect(existsSync(workDir(runtime, t))).toBe(false);
        }
      }, 60_000);
    });

    const bwrapOnly = mode === 'bwrap' ? describe : describe.skip;
    bwrapOnly('the sandbox (bubblewrap)', () => {
      test('a build and an app see only their own working copy and processes, and write only there', async () => {
        const runtime = newRuntime();
        // Another environment's app, running with a secret.
        const other = target();
        expect(await build(runtime, other)).toMatchObject({ ok: true });
        await runtime.deploy(
          other,
          [
            {
              name: 'web',
              spec: WEB,
              vars: { OTHER_SECRET: 'other-secret-value' },
              secretKeys: ['OTHER_SECRET'],
            },
          ],
          { prune: true },
        );
        expect(await awaitReady(runtime, other)).toMatchObject({ ok: true });

        const t = target();
        const otherCopy = join(workDir(runtime, other));
        const spec: AppSpec = {
          ...WEB,
          build: 'node probe.js',
          command: 'node probe.js serve',
          env: { OTHER: otherCopy, PROJECT: process.cwd() },
        };
        expect(await build(runtime, t, spec)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
        await runtime.deploy(t, launch(spec, spec.env), { prune: true });
        const ready = await awaitReady(runtime, t);
        if (!ready.ok) throw new Error(`not ready: ${ready.cause}`);
        const fromApp = await hit((ready.output.urls as Record<string, string>).web!);
        const copy = readdirSync(workDir(runtime, t))[0]!;
        const fromBuild = JSON.parse(
          readFileSync(join(workDir(runtime, t), copy, 'probe-build.json'), 'utf8'),
        );
        const topOfWork = workDir(runtime, t).split('/')[1]!;
        // A node (or git) installed outside /usr (nvm, the Node 22 that .ci/node.sh fetches into the
        // home's cache) is bound read-only into every sandbox, so the top of its path is there too.
        const toolchainTops = [process.execPath, gitBinary()]
          .map((binary) => binary && toolchainDir(realpathSync(binary), []))
          .flatMap((dir) => (dir ? [dir.split('/')[1]!] : []));
        for (const seen of [fromBuild, fromApp]) {
          // A root of system directories and the path to its working copy, nothing else.
          const system = [
            'bin',
            'dev',
            'etc',
            'home',
            'lib',
            'lib32',
            'lib64',
            'libx32',
            'proc',
            'sbin',
            'tmp',
            'usr',
          ];
          const allowed = [...system, topOfWork, ...toolchainTops];
          expect(seen.root.filter((e: string) => !allowed.includes(e))).toEqual([]);
          expect(seen.root).toEqual(expect.arrayContaining(['dev', 'etc', 'proc', 'usr']));
          if (!toolchainTops.includes('root')) expect(seen.root).not.toContain('root');
          expect(seen.project).toBeNull();
          // Its own PID namespace: bwrap's init, the shell, node (a build's shell may have exec'd it).
          expect(seen.pids).toBeLessThanOrEqual(3);
          expect(seen.foreign).toEqual([]);
          expect(seen.other).toBeNull();
          expect(seen.home).toBe(SANDBOX_HOME);
          expect(seen.shadow).toBeNull();
          expect(seen.wroteOutside).toBe(false);
          expect(seen.marker).toBe(`${ORG}/${REPO}/${t.prNumber}/web`);
        }
        // What it wrote in its working copy is there on the host.
        expect(existsSync(join(workDir(runtime, t), copy, 'written-inside'))).toBe(true);
        expect(existsSync('/usr/probe-was-here')).toBe(false);
      }, 30_000);

      test('the sandbox leader carries the owner marker, so recovery finds what a crash left', async () => {
        const dataDir = mkdtempSync(join(root, 'data-'));
        const first = newRuntime(dataDir);
        const t = target();
        await up(first, t);
        const leader = first.running(t, 'web')!.pid;
        const environ = readFileSync(`/proc/${leader}/environ`, 'utf8').split('\0');
        expect(environ).toContain(`PREVIEW_RUNTIME_APP=${ORG}/${REPO}/${t.prNumber}/web`);
        expect(readFileSync(`/proc/${leader}/cmdline`, 'utf8').split('\0')[0]).toMatch(/bwrap$/);
        expect(newRuntime(dataDir).recover()).toBe(1);
        expect(await gone(leader)).toBe(true);
      }, 30_000);
    });
  });
});

describe('isolation bwrap', () => {
  const maybe = BWRAP_SKIP ? test.skip : test;
  // Shown as skipped (with why) where the sandboxed half of this file could not run.
  maybe(
    `runs every test above in bubblewrap sandboxes too${BWRAP_SKIP ? ` (skipped: ${BWRAP_SKIP})` : ''}`,
    () => {
      expect(ISOLATIONS).toContain('bwrap');
    },
  );
});

describe('the work dir is private (hardening)', () => {
  const workOf = (dataDir: string) => join(dataDir, 'work');
  const modeOf = (path: string) => statSync(path).mode & 0o777;

  test('created 0700', () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    newRuntime(dataDir);
    expect(modeOf(workOf(dataDir))).toBe(0o700);
  });

  test('an existing one readable by others is tightened to 0700, with a log line', () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    mkdirSync(workOf(dataDir), { mode: 0o755 });
    chmodSync(workOf(dataDir), 0o755);
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    try {
      newRuntime(dataDir);
    } finally {
      setLogSink((line) => process.stdout.write(`${line}\n`));
    }
    expect(modeOf(workOf(dataDir))).toBe(0o700);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        level: 'warn',
        message: 'work dir was readable by others: mode tightened to 0700',
        was: '0755',
      }),
    ]);
  });

  test('a symlink is refused (someone else may have planted it at a predictable path)', () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    const elsewhere = mkdtempSync(join(root, 'elsewhere-'));
    symlinkSync(elsewhere, workOf(dataDir));
    expect(() => newRuntime(dataDir)).toThrow(/work dir .* is a symlink; refusing to use it/);
  });

  const asRoot = process.getuid?.() === 0 ? test : test.skip;
  asRoot('a directory of another user is refused', () => {
    const dataDir = mkdtempSync(join(root, 'data-'));
    mkdirSync(workOf(dataDir), { mode: 0o700 });
    chownSync(workOf(dataDir), 65534, 65534);
    expect(() => newRuntime(dataDir)).toThrow(/work dir .* belongs to uid 65534, not to this user/);
  });
});
