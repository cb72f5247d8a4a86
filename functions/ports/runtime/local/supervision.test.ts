import { spawn } from 'node:child_process';
import { afterEach, describe, expect, test } from '@jest/globals';
import { liveGroupMembers } from './sandbox.js';
import { exitOf, groupGone, killGroup } from './supervision.js';

/*
 * Waiting for a process group to be gone: a group's leader may exit (or be reaped after a SIGKILL) while
 * processes it started are still running or tearing down. Real processes, found through /proc (Linux).
 */

const groups: number[] = [];
afterEach(() => {
  for (const pgid of groups.splice(0)) killGroup(pgid, 'SIGKILL');
});

/** `sh -c script` as the leader of a process group of its own. */
function group(script: string) {
  const child = spawn('/bin/sh', ['-c', script], { detached: true, stdio: 'ignore' });
  groups.push(child.pid!);
  return child;
}

describe('groupGone', () => {
  test('waits past the leader for the processes it started', async () => {
    const child = group('sleep 1 & exit 0');
    await exitOf(child);
    // One member left: the shell's fork for `sleep` (under load it may not have exec'd it yet).
    expect(liveGroupMembers(child.pid!)).toHaveLength(1);
    await groupGone(child.pid);
    expect(liveGroupMembers(child.pid!)).toEqual([]);
  });

  test('gives up after its bound when a member outlives it', async () => {
    const child = group('sleep 30 & exit 0');
    await exitOf(child);
    const started = Date.now();
    await groupGone(child.pid, 200);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(liveGroupMembers(child.pid!)).toHaveLength(1);
  });

  test('returns at once for a group that is gone or was never started', async () => {
    const child = group('exit 0');
    await exitOf(child);
    const started = Date.now();
    await groupGone(child.pid);
    await groupGone(undefined);
    expect(Date.now() - started).toBeLessThan(200);
  });
});
