import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { commitFiles, makeRepo, setBranch } from '../../support/git.js';
import { defaultWorkDir, previewctl, startProcess, stopProcess } from '../../support/process.js';
import { deliver, prPayload } from '../../support/webhooks.js';

/*
 * `npm start` prints no ExperimentalWarning: not at start, and not when a pull request's changed files
 * are first checked against an application's `paths` globs (which `path.matchesGlob`, experimental on
 * Node 20, did on its first use). The server runs as `npm start` runs it, without the test runner's
 * NODE_OPTIONS (Jest's --experimental-vm-modules would warn on its own).
 */

const dataDir = mkdtempSync(join(tmpdir(), 'preview-warnings-'));
const gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(defaultWorkDir(dataDir), { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

describe('npm start', () => {
  test('stderr holds no ExperimentalWarning, a preview rule on paths checked included', async () => {
    const repo = 'acme/rules';
    const base = makeRepo(gitRoot, repo, { 'web/page.txt': 'v0', 'docs/guide.md': 'v0' });
    const docs = commitFiles(gitRoot, repo, { 'docs/guide.md': 'v1' });
    setBranch(gitRoot, repo, 'docs-change', docs);
    const server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot, NODE_OPTIONS: '' });
    try {
      const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
      const app = await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', repo);
      expect(app.code).toBe(0);
      const rules = ['apps', 'update', '--org', creds.orgId, '--app', app.out.applicationId];
      expect((await previewctl(dataDir, ...rules, '--paths', 'web/**')).code).toBe(0);

      const secret = readFileSync(join(dataDir, 'github-webhook-secret'), 'utf8').trim();
      const payload = prPayload('opened', { repo, number: 1, sha: docs, baseSha: base, ref: 'docs-change' });
      const res = await deliver({ url: server.url }, secret, 'pull_request', payload);
      // The globs were matched against the pull request's changed files (docs/guide.md only).
      expect([res.status, res.body]).toEqual([
        202,
        { ignored: 'the pull request changes no file matching web/**' },
      ]);
      // A process warning is written on the next tick: give it time to reach the pipe.
      await new Promise((r) => setTimeout(r, 500));
      expect(server.stderr()).toContain('listening on');
      expect(server.stderr()).not.toContain('ExperimentalWarning');
    } finally {
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 90_000);
});
