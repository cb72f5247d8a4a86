import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { SERVER_JS } from '../../../../test/support/apps.js';
import { makeRepo } from '../../../../test/support/git.js';
import { GitSourceHost } from '../../source-host/local-git.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { AppSpec, RuntimeTarget } from '../port.js';
import {
  DEFAULT_LIMITS,
  limitsFromEnv,
  limitsSupport,
  SANDBOX_CGROUP_PREFIX,
  type SandboxLimits,
} from './limits.js';
import { ProcessRuntime } from './process.js';
import { bubblewrapUsable } from './sandbox.js';

/*
 * Each sandbox's limits on memory, processes, file size and /tmp, each hit by an app or a build, with the
 * failure naming it. Bubblewrap and cgroups are needed (CI runs as root, where both are); off CI a machine
 * without them skips, saying why.
 */

const support = bubblewrapUsable() ? limitsSupport() : { memory: false, processes: false };
const SKIP = process.env.CI
  ? undefined
  : !bubblewrapUsable()
    ? 'bubblewrap is not usable here'
    : !support.memory || !support.processes
      ? 'no cgroup can be made here for the memory and process limits (not root, no delegated v2 subtree)'
      : undefined;
const maybe = SKIP ? describe.skip : describe;
if (SKIP) console.warn(`local/limits.test.ts skipped: ${SKIP}`);

const root = mkdtempSync(join(tmpdir(), 'sandbox-limits-'));
const gitRoot = join(root, 'git');
const REPO = 'acme/limits';
let sha: string;
const LIMITS: SandboxLimits = { memoryMiB: 64, processes: 32, fileMiB: 2, tmpMiB: 2, diskMiB: 8 };

const outcomes = new Map<string, (o: TaskOutcome) => void>();
const waiting = new Map<string, Promise<TaskOutcome>>();
const outcomeOf = (token: string) => {
  if (!waiting.has(token)) waiting.set(token, new Promise<TaskOutcome>((r) => outcomes.set(token, r)));
  return waiting.get(token)!;
};
const complete = async (token: string, outcome: TaskOutcome) => {
  void outcomeOf(token);
  outcomes.get(token)!(outcome);
};
let seq = 0;
const runtimes: ProcessRuntime[] = [];

beforeAll(() => {
  sha = makeRepo(gitRoot, REPO, { 'server.js': SERVER_JS });
});
/**
 * The sandbox cgroups that exist now (ours and, on a shared machine, maybe others'), as paths; `empty`:
 * only those no process is in (what a runtime that forgot to remove one leaves behind, where another
 * runtime's live sandboxes have their processes).
 */
const sandboxCgroups = (empty = false) =>
  (['memory', 'pids'] as const).flatMap((c) => {
    const own = /^\d+:[^:]*\b(memory|pids)\b[^:]*:(.*)$/gm;
    const dirs: string[] = [];
    for (const m of readFileSync('/proc/self/cgroup', 'utf8').matchAll(own))
      if (m[1] === c) dirs.push(join('/sys/fs/cgroup', c, m[2]!));
    return dirs.flatMap((d) =>
      existsSync(d)
        ? readdirSync(d)
            .filter((e) => e.startsWith(SANDBOX_CGROUP_PREFIX))
            .map((e) => join(d, e))
            .filter((p) => !empty || readProcs(p) === '')
        : [],
    );
  });
const readProcs = (cgroup: string) => {
  try {
    return readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').trim();
  } catch {
    return ''; // removed meanwhile
  }
};
/** The sandbox cgroups this machine had before this file's runtimes started (another run's, left or live). */
let before = new Set<string>();
beforeAll(() => {
  before = new Set(sandboxCgroups());
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.stop()));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function runtime(): ProcessRuntime {
  const dataDir = mkdtempSync(join(root, 'data-'));
  const r = new ProcessRuntime({
    dataDir,
    workDir: join(dataDir, 'work'),
    sourceHost: new GitSourceHost(gitRoot),
    complete,
    readyTimeoutMs: 20_000,
    isolation: 'bwrap',
    limits: LIMITS,
    diskCheckMs: 200,
  });
  runtimes.push(r);
  return r;
}
const target = (): RuntimeTarget => {
  const pr = ++seq;
  return { orgId: 'org-lim', envKey: `${REPO}#${pr}`, repoFullName: REPO, prNumber: pr, generation: 1 };
};

/** Build `spec` as app `web`: the build's outcome. */
async function build(r: ProcessRuntime, t: RuntimeTarget, spec: AppSpec): Promise<TaskOutcome> {
  const token = `build-${++seq}`;
  await r.build(t, sha, { web: spec }, token);
  return outcomeOf(token);
}
/** Build, start and await `web`: the readiness outcome. */
async function start(r: ProcessRuntime, t: RuntimeTarget, spec: AppSpec): Promise<TaskOutcome> {
  expect(await build(r, t, { ...spec, build: undefined })).toEqual({
    ok: true,
    output: { builds: expect.any(Object) },
  });
  await r.deploy(t, [{ name: 'web', spec, vars: {}, secretKeys: [] }], { prune: true });
  const token = `ready-${++seq}`;
  await r.awaitReady(t, { web: spec }, token);
  return outcomeOf(token);
}
const cause = (o: TaskOutcome) => (o.ok ? '' : o.cause);
/** An app: `node -e <script>` that then serves (so only hitting the limit stops it). */
const app = (script: string): AppSpec => ({
  port: 3000,
  command: `node -e "${script}; require('./server.js')" web`,
  health: '/healthz',
});

maybe('sandbox limits (bubblewrap)', () => {
  test('memory: an app that allocates past its limit fails naming it', async () => {
    const o = await start(
      runtime(),
      target(),
      app('const a = []; for (let i = 0; i < 40; i++) a.push(Buffer.alloc(8 * 1024 * 1024, 1))'),
    );
    expect(o).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(cause(o)).toMatch(/^app web exceeded its memory limit \(64 MiB\) and exited \(/);
  }, 60_000);

  test('processes: an app that forks past its limit fails naming it', async () => {
    // 60 sleeping shells: the 33rd fork of the sandbox is refused; the app exits on the first refusal.
    const o = await start(
      runtime(),
      target(),
      app(
        "const { spawn } = require('child_process'); " +
          "for (let i = 0; i < 60; i++) spawn('sleep', ['30']).on('error', () => process.exit(7))",
      ),
    );
    expect(o).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(cause(o)).toMatch(/^app web exceeded its process limit \(32 processes\) and exited/);
  }, 60_000);

  test('file size: a build writing a file past its limit fails naming it', async () => {
    const o = await build(runtime(), target(), {
      ...app(''),
      build: 'head -c 4194304 /dev/zero > big.bin',
    });
    expect(o).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(cause(o)).toMatch(
      /^app web: build `head -c 4194304 \/dev\/zero > big.bin` exceeded its file size limit \(2 MiB per file\)/,
    );
  }, 60_000);

  test('/tmp: an app writing past its tmpfs size fails naming it', async () => {
    const o = await start(
      runtime(),
      target(),
      // Two files under the file size limit, together over the tmpfs size.
      app(
        "const fs = require('fs'); fs.writeFileSync('/tmp/a', Buffer.alloc(1536 * 1024)); " +
          "fs.writeFileSync('/tmp/b', Buffer.alloc(1536 * 1024))",
      ),
    );
    expect(o).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(cause(o)).toMatch(/^app web ran out of space: its \/tmp holds at most 2 MiB and exited/);
  }, 60_000);

  test('disk: an app filling its working copy past the limit (each file under the file limit) is killed, naming it', async () => {
    // Seven files of 1.5 MiB (10.5 MiB in all), then it waits a while before it serves.
    const o = await start(
      runtime(),
      target(),
      app(
        "const fs = require('fs'); for (let i = 0; i < 7; i++) fs.writeFileSync('fill-' + i, Buffer.alloc(1536 * 1024, 1)); " +
          'const until = Date.now() + 5000; while (Date.now() < until) {}',
      ),
    );
    expect(o).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(cause(o)).toMatch(/^app web exceeded its disk limit \(8 MiB in its working copy\) and exited/);
  }, 60_000);

  test('under its limits an app runs as before', async () => {
    expect(await start(runtime(), target(), app('Buffer.alloc(8 * 1024 * 1024, 1)'))).toMatchObject({
      ok: true,
    });
  }, 60_000);

  test('once its runtime is stopped, no sandbox cgroup is left', async () => {
    await Promise.all(runtimes.splice(0).map((r) => r.stop()));
    const deadline = Date.now() + 5_000;
    // New since this file started and empty: left by its runtimes. (A sandbox another run on this
    // machine has live has its processes in it; one it just emptied is gone within the deadline.)
    const ours = () => sandboxCgroups(true).filter((c) => !before.has(c) && existsSync(c));
    while (ours().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(ours()).toEqual([]);
  }, 30_000);
});

describe('limitsFromEnv', () => {
  test('defaults, overrides, and a clear error for a bad value', () => {
    expect(limitsFromEnv({})).toEqual(DEFAULT_LIMITS);
    expect(
      limitsFromEnv({
        PREVIEW_SANDBOX_MEMORY_MB: '512',
        PREVIEW_SANDBOX_TMP_MB: '16',
        PREVIEW_SANDBOX_DISK_MB: '100',
      }),
    ).toEqual({
      ...DEFAULT_LIMITS,
      memoryMiB: 512,
      tmpMiB: 16,
      diskMiB: 100,
    });
    expect(() => limitsFromEnv({ PREVIEW_SANDBOX_PROCESSES: '0' })).toThrow(
      'PREVIEW_SANDBOX_PROCESSES must be a positive whole number (got 0)',
    );
  });
});
