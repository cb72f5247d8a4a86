import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { hit } from '../../../../test/support/apps.js';
import {
  at,
  awaitReady,
  BIG,
  bigSha,
  build,
  dataDirs,
  forEachIsolation,
  gitBinary,
  gone,
  launch,
  newRuntime,
  newToken,
  ORG,
  outcomeOf,
  processRuntimeForFile,
  REPO,
  root,
  sleep,
  target,
  up,
  WEB,
  workDir,
} from '../../../../test/support/process-runtime.js';
import { MASK } from '../../../shared/masking/mask.js';
import type { AppSpec } from '../port.js';
import { SANDBOX_HOME, toolchainDir } from './sandbox.js';

/*
 * The local process runtime on its own (the harness: test/support/process-runtime.ts), its hardening: what
 * a failure quotes of an app's output (secret masking), a teardown racing a checkout, and the bubblewrap
 * sandbox. Everything runs twice: plain processes (isolation `none`) and bubblewrap sandboxes (`bwrap`).
 */

processRuntimeForFile();

forEachIsolation((mode) => {
  describe('ProcessRuntime', () => {
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
