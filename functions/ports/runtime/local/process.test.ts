import { spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { alive, hit } from '../../../../test/support/apps.js';
import {
  at,
  awaitReady,
  BWRAP_SKIP,
  build,
  completions,
  forEachIsolation,
  gone,
  ISOLATIONS,
  launch,
  newRuntime,
  newToken,
  outcomeOf,
  processRuntimeForFile,
  root,
  sha,
  sleep,
  startSlowBuild,
  stateFile,
  strangers,
  superseded,
  target,
  up,
  WEB,
  workDir,
} from '../../../../test/support/process-runtime.js';
import { setLogSink } from '../../../shared/log.js';
import type { AppSpec, RuntimeTarget } from '../port.js';
import { runtimeContract } from '../runtime.contract.js';
import type { ProcessRuntime } from './process.js';

/*
 * The local process runtime on its own (the harness: test/support/process-runtime.ts), its contract,
 * generation fence, build cancellation, teardown, recovery after a restart and stopping an app. Everything
 * runs twice: plain processes (isolation `none`) and bubblewrap sandboxes (`bwrap`).
 */

processRuntimeForFile();

forEachIsolation((mode) => {
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
