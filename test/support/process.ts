export { defaultWorkDir } from '../../lib/local/adapters.js';

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const ROOT = new URL('../..', import.meta.url).pathname;

/** A TCP port on 127.0.0.1 that nothing listens on right now (for a child process's PORT). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Start `node --import tsx bin/start.ts` (what `npm start` runs: one process, so a SIGKILL really kills
 * the server) and wait for its listening line.
 */
export async function startProcess(
  dataDir: string,
  env: Record<string, string> = {},
): Promise<{ proc: ChildProcess; url: string; stderr: () => string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts'], {
    cwd: ROOT,
    // Working copies go where the server puts them by default (or `env` says), not where a harness did.
    env: { ...withoutWorkDir(process.env), PORT: '0', PREVIEW_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stdout?.resume();
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line; stderr: ${err}`)), 30_000);
    proc.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
  });
  return { proc, url, stderr: () => err };
}

/** Run `previewctl … --json` against the local data dir `dataDir`; its exit code and parsed output. */
export async function previewctl(dataDir: string, ...args: string[]): Promise<{ code: number; out: any }> {
  try {
    const { stdout } = await promisify(execFile)(
      'node',
      [join(ROOT, 'bin/previewctl.mjs'), ...args, '--json'],
      {
        cwd: dataDir,
        env: { ...process.env, PREVIEW_DATA_DIR: dataDir },
      },
    );
    return { code: 0, out: JSON.parse(stdout) };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: JSON.parse(e.stdout) };
  }
}

/** Run `node bin/start.ts` with `env` over this process's to its end (it is expected to refuse to start). */
export function startToExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    proc.once('exit', (code) => resolve({ code, stderr }));
  });
}

/** `previewctl ARGS` as a person runs it (no `--json`), from `cwd` with `env` over this process's: exit code, stdout and stderr. */
export async function previewctlRaw(cwd: string, env: Record<string, string>, ...args: string[]) {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      'node',
      [join(ROOT, 'bin/previewctl.mjs'), ...args],
      {
        cwd,
        env: { ...process.env, ...env },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Send `signal` and resolve with the exit code once the process has exited. */
export const stopProcess = (proc: ChildProcess, signal: NodeJS.Signals) =>
  new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
    proc.once('exit', (code) => resolve(code));
    proc.kill(signal);
  });

function withoutWorkDir(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { PREVIEW_WORK_DIR: _, ...rest } = env;
  return rest;
}
