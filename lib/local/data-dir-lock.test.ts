import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import { acquireDataDirLock, DataDirInUseError, liveOwner, lockPath } from './data-dir-lock.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));
const fresh = () => {
  dir = mkdtempSync(join(tmpdir(), 'lock-'));
  return dir;
};

/** The pid of a process that has exited (so nothing runs under it, for now). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
    encoding: 'utf8',
  });
  return Number(child.stdout);
}

describe('the data dir lock', () => {
  test('taken, refused to a second taker while held (naming pid and port), free again once released', () => {
    const d = fresh();
    const lock = acquireDataDirLock(d, 'npm start');
    expect(JSON.parse(readFileSync(lockPath(d), 'utf8'))).toMatchObject({
      pid: process.pid,
      by: 'npm start',
      port: null,
    });
    expect(() => acquireDataDirLock(d, 'npm start')).toThrow(
      `data dir ${d} is in use by npm start (pid ${process.pid}, starting)`,
    );
    lock.setPort(4321);
    expect(() => acquireDataDirLock(d, 'previewctl')).toThrow(
      new DataDirInUseError(d, { ...lock.owner, port: 4321 }),
    );
    expect(() => acquireDataDirLock(d, 'previewctl')).toThrow(
      `data dir ${d} is in use by npm start (pid ${process.pid}, port 4321)`,
    );
    expect(liveOwner(d)).toMatchObject({ pid: process.pid, port: 4321 });
    lock.release();
    expect(existsSync(lockPath(d))).toBe(false);
    expect(liveOwner(d)).toBeUndefined();
    const again = acquireDataDirLock(d, 'previewctl');
    expect(again.owner.by).toBe('previewctl');
    again.release();
    // No temporary files are left behind.
    expect(readdirSync(d)).toEqual([]);
  });

  test('a lock whose process is gone is taken over', () => {
    const d = fresh();
    const pid = deadPid();
    writeFileSync(
      lockPath(d),
      JSON.stringify({ pid, by: 'npm start', port: 3000, startedAt: new Date().toISOString() }),
    );
    expect(liveOwner(d)).toBeUndefined();
    const lock = acquireDataDirLock(d, 'npm start');
    expect(JSON.parse(readFileSync(lockPath(d), 'utf8')).pid).toBe(process.pid);
    lock.release();
    expect(readdirSync(d)).toEqual([]);
  });

  test('a pid the system gave to a newer process, or an unreadable lock, counts as gone', () => {
    const d = fresh();
    // This process (alive) started long before a lock said to be written in 2001: a reused pid.
    writeFileSync(
      lockPath(d),
      JSON.stringify({ pid: process.pid, by: 'npm start', port: 3000, startedAt: '2001-01-01T00:00:00Z' }),
    );
    if (existsSync(`/proc/${process.pid}/stat`)) expect(liveOwner(d)).toBeUndefined();
    writeFileSync(lockPath(d), '{not json');
    const lock = acquireDataDirLock(d, 'npm start');
    expect(lock.owner.pid).toBe(process.pid);
    lock.release();
  });

  test('a released lock that another process holds since is left alone', () => {
    const d = fresh();
    const lock = acquireDataDirLock(d, 'npm start');
    const other = { pid: process.ppid, by: 'npm start', port: 1, startedAt: new Date().toISOString() };
    writeFileSync(lockPath(d), JSON.stringify(other));
    lock.setPort(99);
    lock.release();
    expect(JSON.parse(readFileSync(lockPath(d), 'utf8'))).toEqual(other);
  });
});
