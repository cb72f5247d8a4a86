import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { bubblewrapArgs, SANDBOX_HOME, toolchainDir } from './sandbox.js';

/*
 * The bubblewrap command line (what runs is tested in local/process-hardening.test.ts and
 * test/integration).
 */

const root = mkdtempSync(join(tmpdir(), 'sandbox-args-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('bubblewrapArgs', () => {
  const work = join(root, 'work', 'org', 'acme', 'web', '1', 'web-x');
  const hidden = [root];
  // bubblewrapArgs resolves the working copy's real path: it must exist.
  mkdirSync(work, { recursive: true });
  const args = (build: boolean) => bubblewrapArgs('npm run build', work, { build, hidden });

  test('its own namespaces, no capability, an allowlist of binds, the working copy the only writable one', () => {
    const a = args(false);
    for (const flag of ['--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try'])
      expect(a).toContain(flag);
    expect(a.join(' ')).toContain('--cap-drop ALL');
    expect(a.join(' ')).toContain('--ro-bind /usr /usr --ro-bind /etc /etc');
    expect(a.join(' ')).toContain('--dev /dev --proc /proc --tmpfs /tmp');
    // Never the whole root, never anything that holds the data or work dir.
    const binds = a.flatMap((x, i) => (x === '--bind' || x === '--ro-bind' ? [a[i + 1]!] : []));
    expect(binds).not.toContain('/');
    for (const b of binds) for (const h of hidden) expect(h.startsWith(`${b}/`)).toBe(false);
    expect(a.filter((x) => x === '--bind')).toHaveLength(1);
    expect(a.join(' ')).toContain(`--bind ${work} ${work}`);
    expect(a.join(' ')).toContain(`--dir ${SANDBOX_HOME} --chdir ${work}`);
    expect(a.slice(-4)).toEqual(['--', '/bin/sh', '-c', 'npm run build']);
  });

  test("bwrap makes no network namespace (the environment's is joined first) and no new session", () => {
    expect(args(false)).not.toContain('--unshare-net');
    expect(args(false)).not.toContain('--unshare-all');
    expect(args(false)).not.toContain('--new-session');
  });

  test('a build dies with the server; an app does not (it is stopped gracefully)', () => {
    expect(args(true)).toContain('--die-with-parent');
    expect(args(false)).not.toContain('--die-with-parent');
  });

  test('the tmpfs on /tmp gets its size limit when one is given (sandbox limits)', () => {
    const a = bubblewrapArgs('true', work, { build: false, hidden, tmpMiB: 64 });
    expect(a.join(' ')).toContain(`--size ${64 * 1024 * 1024} --tmpfs /tmp`);
    expect(args(false)).not.toContain('--size');
  });

  test('the tmpfs on /tmp comes before the working copy (which may live under /tmp)', () => {
    const a = args(false);
    expect(a.indexOf('--tmpfs')).toBeLessThan(a.indexOf('--bind'));
  });
});

describe('toolchainDir: where node or git live outside /usr', () => {
  test.each([
    ['/usr/bin/node', [], undefined],
    ['/usr/local/bin/node', [], undefined],
    ['/opt/node-v20/bin/node', [], '/opt/node-v20'],
    [
      '/root/.nvm/versions/node/v20.19.0/bin/node',
      ['/root/project/.preview-data'],
      '/root/.nvm/versions/node/v20.19.0',
    ],
    // The prefix would bring the home (and the data dir in it) along: only the binary's directory.
    ['/home/dev/bin/node', ['/home/dev/project/.preview-data'], '/home/dev/bin'],
    ['/node', [], undefined],
  ])('%s (hidden %j) → %s', (binary, hidden, dir) => {
    expect(toolchainDir(binary, hidden)).toBe(dir);
  });
});
