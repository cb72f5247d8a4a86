import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { limitsSupport } from '../../../functions/ports/runtime/local/limits.js';
import { defaultWorkDir } from '../../../lib/local/adapters.js';
import { isolationSkipReason } from '../../support/isolation.js';

/*
 * `npm start` (bin/start.ts, as a child process) about isolation and its private directories:
 * - it says whether builds and apps are isolated, and refuses to start when
 *   PREVIEW_ISOLATION=bwrap but bubblewrap is not usable;
 * - the data dir and the default work dir are private: created 0700, a looser mode is
 *   tightened with a log line, and a work dir planted at its predictable path in the shared temp dir (a
 *   symlink, or a directory of another user) is refused.
 */

const ROOT = new URL('../../..', import.meta.url).pathname;
const cleanup: string[] = [];
afterAll(() => {
  for (const dir of cleanup) rmSync(dir, { recursive: true, force: true });
});

/** A fresh data dir (and its default work dir), removed after the file. */
function newDataDir(): string {
  const dataDir = mkdtempSync(join(tmpdir(), 'preview-start-'));
  cleanup.push(dataDir, defaultWorkDir(dataDir));
  return dataDir;
}

interface StartResult {
  listening: boolean;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}
/**
 * Run `npm start`'s entry point on `dataDir` until it is listening (then stop it with SIGTERM) or it
 * exits on its own. Working copies go to the default work dir (PREVIEW_WORK_DIR is not passed on).
 */
function start(dataDir: string, env: Record<string, string> = {}): Promise<StartResult> {
  const { PREVIEW_WORK_DIR: _w, PREVIEW_ISOLATION: _i, ...inherited } = process.env;
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts'], {
    cwd: ROOT,
    env: { ...inherited, PORT: '0', PREVIEW_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let listening = false;
  proc.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  proc.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
    // The isolation line is the last of the start banner.
    if (!listening && /listening on http/.test(stderr) && /isolation: /.test(stderr)) {
      listening = true;
      proc.kill('SIGTERM');
    }
  });
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ listening, code, signal, stdout, stderr });
    });
  });
}

const ON = 'isolation: bubblewrap (each build and app in its own PID namespace, sees only its working copy)';
/** A PATH where no bwrap is found (node itself is started by its full path). */
const NO_BWRAP = { PATH: '/nonexistent-bin' };
const skip = isolationSkipReason();

describe('npm start and isolation', () => {
  const maybe = skip ? test.skip : test;
  maybe(
    `says isolation is on where bubblewrap is usable${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      const result = await start(newDataDir(), { PREVIEW_SANDBOX_MEMORY_MB: '512' });
      expect(result).toMatchObject({ listening: true, code: 0 });
      expect(result.stderr).toContain(ON);
      // Each sandbox's limits, one set by the environment; where this machine cannot make
      // cgroups, the line says which limits are not enforced.
      expect(result.stderr).toContain(
        'sandbox limits: memory 512 MiB, 256 processes, files up to 1024 MiB, /tmp 64 MiB, working copy 4096 MiB',
      );
      // The network: a namespace per environment where the server is root and pasta works, else shared.
      expect(result.stderr).toMatch(
        /\n {2}network: (a namespace per environment \(pasta\)|shared with this machine)/,
      );
      const enforced = limitsSupport();
      if (enforced.memory && enforced.processes) expect(result.stderr).not.toContain('NOT enforced');
      else expect(result.stderr).toMatch(/NOT enforced here: (memory|processes)/);
    },
    60_000,
  );

  test('a sandbox limit that is not a positive whole number: refuses to start, naming it', async () => {
    const result = await start(newDataDir(), { PREVIEW_SANDBOX_PROCESSES: 'lots' });
    expect(result).toMatchObject({ listening: false, code: 1 });
    expect(result.stderr).toContain('PREVIEW_SANDBOX_PROCESSES must be a positive whole number (got lots)');
  }, 60_000);

  test('without bubblewrap, says that local mode is single-tenant and how to turn isolation on', async () => {
    const result = await start(newDataDir(), NO_BWRAP);
    expect(result).toMatchObject({ listening: true, code: 0 });
    expect(result.stderr).toMatch(
      /isolation: none \(.*local mode is single-tenant.*apt-get install bubblewrap/,
    );
  }, 60_000);

  test('PREVIEW_ISOLATION=none turns it off, saying so', async () => {
    const result = await start(newDataDir(), { PREVIEW_ISOLATION: 'none' });
    expect(result).toMatchObject({ listening: true, code: 0 });
    expect(result.stderr).toContain('isolation: none (');
  }, 60_000);

  test('PREVIEW_ISOLATION=bwrap where bubblewrap is not usable: refuses to start, saying why', async () => {
    const result = await start(newDataDir(), { ...NO_BWRAP, PREVIEW_ISOLATION: 'bwrap' });
    expect(result).toMatchObject({ listening: false, code: 1 });
    expect(result.stderr).toContain(
      'preview control plane did not start: PREVIEW_ISOLATION=bwrap, but bubblewrap is not usable here',
    );
    expect(result.stderr).toContain('apt-get install bubblewrap');
  }, 60_000);
});

describe('npm start keeps its directories private', () => {
  const modeOf = (path: string) => statSync(path).mode & 0o777;

  test('a data dir readable by others is tightened to 0700, with a log line; the work dir is created 0700', async () => {
    const dataDir = newDataDir();
    chmodSync(dataDir, 0o755);
    const result = await start(dataDir, { PREVIEW_ISOLATION: 'none' });
    expect(result).toMatchObject({ listening: true, code: 0 });
    expect(modeOf(dataDir)).toBe(0o700);
    expect(result.stdout).toContain('data dir was readable by others: mode tightened to 0700');
    expect(modeOf(defaultWorkDir(dataDir))).toBe(0o700);
  }, 60_000);

  test('a symlink planted at the default work dir path is refused', async () => {
    const dataDir = newDataDir();
    const trap = mkdtempSync(join(tmpdir(), 'preview-trap-'));
    cleanup.push(trap);
    symlinkSync(trap, defaultWorkDir(dataDir));
    const result = await start(dataDir, { PREVIEW_ISOLATION: 'none' });
    expect(result).toMatchObject({ listening: false, code: 1 });
    expect(result.stderr).toMatch(/did not start: work dir \S+ is a symlink; refusing to use it/);
  }, 60_000);

  const asRoot = process.getuid?.() === 0 ? test : test.skip;
  asRoot(
    'a default work dir that belongs to another user is refused',
    async () => {
      const dataDir = newDataDir();
      mkdirSync(defaultWorkDir(dataDir), { mode: 0o777 });
      chownSync(defaultWorkDir(dataDir), 65534, 65534);
      const result = await start(dataDir, { PREVIEW_ISOLATION: 'none' });
      expect(result).toMatchObject({ listening: false, code: 1 });
      expect(result.stderr).toMatch(/did not start: work dir \S+ belongs to uid 65534, not to this user/);
    },
    60_000,
  );
});
