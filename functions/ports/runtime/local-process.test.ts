import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { alive, BUILD_JS, hit, SERVER_JS } from '../../../test/support/apps.js';
import { makeRepo } from '../../../test/support/git.js';
import { GitSourceHost } from '../source-host/local-git.js';
import type { TaskOutcome } from '../workflows/port.js';
import { ProcessRuntime } from './local-process.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from './port.js';
import { runtimeContract } from './runtime.contract.js';

/*
 * The local process runtime on its own: a real git source host over a repository on disk, real app
 * processes, and a `complete` callback that records how each task token ended.
 */

const root = mkdtempSync(join(tmpdir(), 'process-runtime-'));
const gitRoot = join(root, 'git');
const REPO = 'acme/shop';
const ORG = 'org-rt';
let sha: string;

const WEB: AppSpec = { port: 3000, command: 'node server.js web', health: '/healthz' };

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
async function waitForFile(path: string, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  while (!existsSync(path) || readFileSync(path, 'utf8') === '') {
    if (Date.now() > deadline) throw new Error(`${path} did not appear`);
    await sleep(20);
  }
  return readFileSync(path, 'utf8');
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
  });
  runtimes.push(runtime);
  dataDirs.set(runtime, dataDir);
  return runtime;
}

beforeAll(() => {
  sha = makeRepo(gitRoot, REPO, { 'server.js': SERVER_JS, 'build.js': BUILD_JS, VERSION: 'v1' });
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
runtimeContract('ProcessRuntime', {
  runtime: () => newRuntime(),
  newToken,
  outcomeOf,
  target: (generation = 1) => target(generation),
  sha: () => sha,
  app: WEB,
});

/** Build, deploy and wait for readiness; returns the app's URL. */
async function up(runtime: ProcessRuntime, t: RuntimeTarget, spec: AppSpec = WEB): Promise<string> {
  expect(await build(runtime, t, spec)).toEqual({ ok: true, output: {} });
  await runtime.deploy(t, launch(spec), { prune: true });
  const ready = await awaitReady(runtime, t);
  if (!ready.ok) throw new Error(`not ready: ${ready.cause}`);
  return (ready.output.urls as Record<string, string>).web!;
}
const superseded = { name: 'Superseded' };
/**
 * Start a 3-second build of `web` (it writes its pid to a file first) and wait until it runs. Returns its
 * token, the build process and when it started.
 */
async function startSlowBuild(runtime: ProcessRuntime, t: RuntimeTarget) {
  const pidFile = join(root, `build-${t.prNumber}-${t.generation}-${newToken()}.pid`);
  const slow: AppSpec = {
    ...WEB,
    build: `node -e "require('fs').writeFileSync(process.env.PID_FILE, String(process.pid)); setTimeout(()=>{},3000)"`,
    env: { PID_FILE: pidFile },
  };
  const token = newToken();
  const startedAt = Date.now();
  await runtime.build(t, sha, { web: slow }, token);
  const pid = Number(await waitForFile(pidFile));
  return { token, pid, startedAt };
}
const stateFile = (runtime: ProcessRuntime) => join(dataDirs.get(runtime)!, 'runtime', 'state.json');
/** The environment's working copies (`<workDir>/<org>/<owner>/<repo>/<pr>`). */
const workDir = (runtime: ProcessRuntime, t: RuntimeTarget) =>
  join(dataDirs.get(runtime)!, 'work', ORG, ...REPO.split('/'), String(t.prNumber));

describe('ProcessRuntime', () => {
  test('build → deploy → awaitReady completes with the URL, which answers from the built SHA', async () => {
    const runtime = newRuntime();
    const t = target();
    const buildToken = newToken();
    await runtime.build(t, sha, { web: WEB }, buildToken);
    expect(await outcomeOf(buildToken)).toEqual({ ok: true, output: {} });

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
        async (r: ProcessRuntime, t: RuntimeTarget) => expect(await build(r, t)).toMatchObject({ ok: true }),
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
      const slow: AppSpec = { ...WEB, command: `node -e "setTimeout(()=>require('./server.js'),2000)" web` };
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
        expect(await outcomeOf(fastToken)).toEqual({ ok: true, output: {} });
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
      expect(await outcomeOf(siteToken)).toEqual({ ok: true, output: {} });
    }, 30_000);

    test('a failing build fails its token with a DeployFailed naming the app and its output', async () => {
      const runtime = newRuntime();
      const spec: AppSpec = { ...WEB, build: `node -e "console.error('no left-pad'); process.exit(2)"` };
      const outcome = await build(runtime, target(), spec);
      expect(outcome).toEqual({
        ok: false,
        error: 'DeployFailed',
        cause: expect.stringMatching(
          /^app web: build `.*` failed \(exit code 2\); last output: no left-pad$/,
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
      const pidFile = join(root, `orphan-build-${prSeq}.pid`);
      const slow: AppSpec = {
        ...WEB,
        build: `node -e "require('fs').writeFileSync(process.env.PID_FILE, String(process.pid)); setTimeout(()=>{},10000)"`,
        env: { PID_FILE: pidFile },
      };
      await first.build(tBuild, sha, { web: slow }, newToken());
      const buildPid = Number(await waitForFile(pidFile));

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
      expect(readdirSync(workDir(second, tApp))).toHaveLength(1);

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
});
