import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from '@jest/globals';

/*
 * `npm start` under a process manager: a SIGTERM to npm (what `kill`, systemd or a terminal's job control
 * send) reaches the server itself, which stops gracefully. npm signals its child, and the start script
 * `exec`s node so that child is the server (without `exec`, `sh` died and left the server running).
 */

const ROOT = join(import.meta.dirname, '../../..');
const dataDir = mkdtempSync(join(tmpdir(), 'preview-npm-start-'));
const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
let leftover: number[] = [];
afterAll(() => {
  for (const pid of leftover) if (alive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

test('a SIGTERM to npm start stops the server, and no process of it is left', async () => {
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', PREVIEW_DATA_DIR: dataDir },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line; stderr: ${err}`)), 60_000);
    npm.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      if (/listening on http/.test(err)) {
        clearTimeout(timer);
        resolve();
      }
    });
    npm.once('exit', (code) => reject(new Error(`npm start exited ${code}: ${err}`)));
  });
  // Every process under npm: the server itself (the script `exec`s node), and whatever that started.
  const under = (pid: number): number[] => {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return kids
      ? kids
          .split(/\s+/)
          .map(Number)
          .flatMap((k) => [k, ...under(k)])
      : [];
  };
  const processes = under(npm.pid!);
  leftover = processes;
  const server = processes.filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('node\0'));
  expect(server).toHaveLength(1);

  npm.kill('SIGTERM');
  await new Promise((r) => npm.once('exit', r));
  const deadline = Date.now() + 15_000;
  while (processes.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(processes.filter(alive)).toEqual([]);
  expect(err).toMatch(/SIGTERM: stopping/);
}, 90_000);
