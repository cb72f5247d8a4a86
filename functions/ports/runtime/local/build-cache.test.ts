import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { findBuild, findRebuilt, keepBuild, keepRebuilt } from './build-cache.js';
import type { LocalRuntime } from './state.js';

/*
 * Build outputs kept on disk: the shared ones by identity, and an environment's own rebuilt one (what
 * its later whole deploys at that identity take, and no other environment).
 */
const root = mkdtempSync(join(tmpdir(), 'build-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const rt = { opts: { workDir: join(root, 'work') } } as unknown as LocalRuntime;
const pr = (prNumber: number) => ({
  orgId: 'org-1',
  repoFullName: 'acme/shop',
  envKey: `acme/shop#${prNumber}`,
});
/** A finished working copy whose output file says `text`. */
function workingCopy(text: string): string {
  const dir = mkdtempSync(join(root, 'copy-'));
  mkdirSync(join(dir, 'dist'));
  writeFileSync(join(dir, 'dist', 'out.txt'), text);
  return dir;
}
const C1 = 'c'.repeat(40);

describe('an environment’s rebuilt output', () => {
  test('found by that environment at that identity only; a newer rebuild replaces it', async () => {
    await keepRebuilt(rt, pr(1), 'web', 'id-1', workingCopy('rebuilt one'), C1);
    const found = await findRebuilt(rt, pr(1), 'web', 'id-1');
    expect(found?.commit).toBe(C1);
    expect(readFileSync(join(found!.tree, 'dist', 'out.txt'), 'utf8')).toBe('rebuilt one');
    expect(await findRebuilt(rt, pr(1), 'web', 'id-2')).toBeUndefined(); // other inputs
    expect(await findRebuilt(rt, pr(2), 'web', 'id-1')).toBeUndefined(); // another environment
    expect(await findRebuilt(rt, pr(1), 'api', 'id-1')).toBeUndefined(); // another app

    await keepRebuilt(rt, pr(1), 'web', 'id-1', workingCopy('rebuilt two'), C1);
    const again = await findRebuilt(rt, pr(1), 'web', 'id-1');
    expect(readFileSync(join(again!.tree, 'dist', 'out.txt'), 'utf8')).toBe('rebuilt two');
  });

  test('is never the shared output of its identity', async () => {
    await keepBuild(rt, pr(3), 'web', 'id-3', workingCopy('first build'), C1);
    await keepRebuilt(rt, pr(3), 'web', 'id-3', workingCopy('rebuilt'), C1);
    const shared = await findBuild(rt, pr(4), 'web', 'id-3');
    expect(readFileSync(join(shared!.tree, 'dist', 'out.txt'), 'utf8')).toBe('first build');
  });
});
