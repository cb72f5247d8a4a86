import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { makeRepo } from '../../../test/support/git.js';
import { GitSourceHost } from './local-git.js';
import type { SourceHost } from './port.js';

/*
 * The SourceHost contract, run against every adapter. Each adapter's fixture holds the repository
 * `acme/shop` with `preview.yaml` and `src/app.js` on `main` at `sha`.
 */

const root = mkdtempSync(join(tmpdir(), 'source-host-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const FILES = { 'preview.yaml': 'apps: {}\n', 'src/app.js': 'console.log(1)\n' };

function sourceHostContract(name: string, setup: () => { host: SourceHost; sha: string }) {
  describe(`${name} honours the SourceHost contract`, () => {
    let host: SourceHost;
    let sha: string;
    beforeAll(() => {
      ({ host, sha } = setup());
    });

    test('an installation exists for a reachable repository, none for an unknown one', async () => {
      expect(await host.installation('acme/shop')).toEqual({ installationId: expect.any(String) });
      expect(await host.installation('acme/nope')).toBeUndefined();
    });

    test('resolveBranch: found, ref-not-found, repository-not-found', async () => {
      expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'found', sha });
      expect(await host.resolveBranch('acme/shop', 'no-such-branch')).toEqual({ kind: 'ref-not-found' });
      expect(await host.resolveBranch('acme/nope', 'main')).toEqual({ kind: 'repository-not-found' });
    });

    test('hasCommit: the head, not a made-up SHA, not in another repository', async () => {
      expect(await host.hasCommit('acme/shop', sha)).toBe(true);
      expect(await host.hasCommit('acme/shop', 'f'.repeat(40))).toBe(false);
      expect(await host.hasCommit('acme/nope', sha)).toBe(false);
    });

    test('readFile: a file at a commit, undefined when absent', async () => {
      expect(await host.readFile('acme/shop', sha, 'preview.yaml')).toBe(FILES['preview.yaml']);
      expect(await host.readFile('acme/shop', sha, 'missing.txt')).toBeUndefined();
      expect(await host.readFile('acme/shop', 'f'.repeat(40), 'preview.yaml')).toBeUndefined();
    });

    test('checkout materializes the tree of a commit; an unknown commit throws', async () => {
      const dir = join(mkdtempSync(join(root, 'co-')), 'tree');
      await host.checkout('acme/shop', sha, dir);
      expect(readFileSync(join(dir, 'src/app.js'), 'utf8')).toBe(FILES['src/app.js']);
      expect(
        readdirSync(dir)
          .filter((f) => f !== '.git')
          .sort(),
      ).toEqual(['preview.yaml', 'src']);
      await expect(host.checkout('acme/shop', 'f'.repeat(40), join(root, 'co-bad'))).rejects.toThrow();
    });
  });
}

sourceHostContract('GitSourceHost', () => {
  const gitRoot = join(root, 'git');
  const sha = makeRepo(gitRoot, 'acme/shop', FILES);
  return { host: new GitSourceHost(gitRoot), sha };
});
