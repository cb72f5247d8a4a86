import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { makeRepo } from '../../../test/support/git.js';
import { GitSourceHost } from './local-git.js';

/*
 * What the local git source host does beyond the SourceHost contract (source-host.contract.test.ts):
 * a checkout can be cancelled, and settles only once git is gone (a teardown racing a clone once removed a
 * working copy git was still writing, ENOTEMPTY); its errors name no path of this machine.
 */

const root = mkdtempSync(join(tmpdir(), 'local-git-'));
const gitRoot = join(root, 'git');
let host: GitSourceHost;
let sha: string;

beforeAll(() => {
  const files: Record<string, string> = { 'README.md': 'big\n' };
  for (let d = 0; d < 30; d++)
    for (let f = 0; f < 50; f++) files[`d${d}/f${f}.txt`] = `${d}-${f}-${'x'.repeat(3_000)}\n`;
  sha = makeRepo(gitRoot, 'acme/big', files);
  host = new GitSourceHost(gitRoot);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Processes whose command line mentions `text` (Linux: /proc). */
function processesMentioning(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const zombie = stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z';
      if (!zombie && cmdline.includes(text)) found.push(`${pid}: ${cmdline.replace(/\0/g, ' ')}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GitSourceHost.checkout', () => {
  test('cancelled mid-way: rejects with AbortError only once git has exited; the copy can go at once', async () => {
    for (const afterMs of [0, 10, 30, 60]) {
      const target = join(mkdtempSync(join(root, 'co-')), 'tree');
      const abort = new AbortController();
      const checkout = host.checkout('acme/big', sha, target, { signal: abort.signal });
      await sleep(afterMs);
      abort.abort();
      const outcome = await checkout.then(
        () => 'done',
        (err: Error) => err.name,
      );
      // Cancelled, or (when it was quicker than the abort) done; either way git is gone now.
      expect(['AbortError', 'done']).toContain(outcome);
      expect(processesMentioning(target)).toEqual([]);
      rmSync(target, { recursive: true, force: true });
      await sleep(50);
      expect(existsSync(target)).toBe(false);
    }
  }, 30_000);

  test('an already aborted signal starts nothing', async () => {
    const target = join(mkdtempSync(join(root, 'co-')), 'tree');
    const abort = new AbortController();
    abort.abort();
    await expect(host.checkout('acme/big', sha, target, { signal: abort.signal })).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(existsSync(target)).toBe(false);
  });

  test('errors never name a path of this machine', async () => {
    const occupied = join(mkdtempSync(join(root, 'co-')), 'tree');
    mkdirSync(occupied);
    writeFileSync(join(occupied, 'file'), 'x');
    const cloneError = await host.checkout('acme/big', sha, occupied).catch((err: Error) => err.message);
    const missing = join(mkdtempSync(join(root, 'co-')), 'tree');
    const checkoutError = await host
      .checkout('acme/big', 'f'.repeat(40), missing)
      .catch((err: Error) => err.message);
    for (const message of [cloneError, checkoutError]) {
      expect(message).toMatch(/^git (clone|checkout) failed: /);
      expect(message).not.toContain(root);
    }
    expect(cloneError).toContain('the working copy');
  });
});
