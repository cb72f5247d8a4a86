import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { keys } from '../../../manifest/tables.js';
import { makeSocketDir, REDIS_SOCKET, SOCKET_PATH_MAX, socketDir } from './services.js';
import { envId } from './state.js';

/* Where a local service's Unix socket lives (the servers themselves: test/integration/environments). */

const scratch = mkdtempSync(join(tmpdir(), 'service-sockets-'));
const made: string[] = [];
afterAll(() => {
  for (const dir of [scratch, ...made]) rmSync(dir, { recursive: true, force: true });
});

// GitHub's longest names (owner 39, repository 100) and a data dir well past what a socket path holds.
const owner = 'o'.repeat(39);
const repo = 'r'.repeat(100);
const longRoot = join(scratch, 'd'.repeat(120), 'runtime');
const longId = envId({
  orgId: 'org-0123456789abcdef0123456789abcdef',
  envKey: keys.environments.envKey(`${owner}/${repo}`, 99_999),
});
const socketsOf = (dir: string) => [
  join(dir, '.s.PGSQL.65535'),
  join(dir, '.s.PGSQL.5432'),
  join(dir, REDIS_SOCKET),
];
const bytes = (path: string) => Buffer.byteLength(path);

describe('socketDir', () => {
  test('with a long data dir and the longest owner and repository names, every socket path fits', () => {
    // Under the service's own directory (where the sockets were) it would not.
    expect(
      bytes(join(longRoot, 'services', longId, 'a-service-name', 'sock', '.s.PGSQL.5432')),
    ).toBeGreaterThan(SOCKET_PATH_MAX);
    for (const name of ['db', 'cache', 'a-rather-long-service-name-of-sixty-four-characters-at-the-most']) {
      const dir = socketDir(longRoot, longId, name);
      expect(dir.startsWith(`${longRoot}/`)).toBe(false);
      for (const path of socketsOf(dir)) expect(bytes(path)).toBeLessThanOrEqual(SOCKET_PATH_MAX);
    }
  });

  test('a data dir short enough keeps the sockets under it, still within the limit', () => {
    const root = join(scratch, 'short', 'runtime');
    const dir = socketDir(root, longId, 'db');
    expect(dirname(dir)).toBe(join(root, 'sock'));
    for (const path of socketsOf(dir)) expect(bytes(path)).toBeLessThanOrEqual(SOCKET_PATH_MAX);
  });

  test('one directory per service, environment and data dir, the same one every time', () => {
    const dirs = [
      socketDir(longRoot, longId, 'db'),
      socketDir(longRoot, longId, 'cache'),
      socketDir(longRoot, longId.replace(/99999$/, '1'), 'db'),
      socketDir(`${longRoot}2`, longId, 'db'),
    ];
    expect(new Set(dirs).size).toBe(dirs.length);
    expect(socketDir(longRoot, longId, 'db')).toBe(dirs[0]);
  });

  test('a server listens and is reached at the longest socket path of a long data dir', async () => {
    const dir = socketDir(longRoot, longId, 'db');
    made.push(dir);
    makeSocketDir(dir);
    const path = join(dir, '.s.PGSQL.65535');
    const server = createServer((s) => s.end('hello'));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const c = createConnection(path);
        let got = '';
        c.on('data', (d) => {
          got += d.toString();
        });
        c.once('end', () => resolve(got));
        c.once('error', reject);
      });
      expect(answer).toBe('hello');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('makeSocketDir', () => {
  test('makes the directory and its parent 0700', () => {
    const dir = join(scratch, 'made', 'parent', 'abc');
    makeSocketDir(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(dirname(dir)).mode & 0o777).toBe(0o700);
    // Again (every start makes it): no error.
    makeSocketDir(dir);
  });

  test('refuses a parent another user could reach: open to others, or a link', () => {
    const open = join(scratch, 'open');
    mkdirSync(open);
    chmodSync(open, 0o755);
    expect(() => makeSocketDir(join(open, 'abc'))).toThrow(/not this server's own/);
    const real = join(scratch, 'real');
    mkdirSync(real, { mode: 0o700 });
    const link = join(scratch, 'link');
    symlinkSync(real, link);
    expect(() => makeSocketDir(join(link, 'abc'))).toThrow(/not this server's own/);
  });
});
