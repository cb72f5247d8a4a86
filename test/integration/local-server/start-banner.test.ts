import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { defaultWorkDir, startProcess, startToExit, stopProcess } from '../../support/process.js';

/*
 * `npm start` for a newcomer: its banner names the dashboard and the first commands, the fair share it
 * applies and the browser test runs use;
 * working copies no environment owns (the data dir was deleted) are removed at start; a bad
 * PREVIEW_APP_PORTS stops it at once, saying what is wrong.
 */

const dataDir = mkdtempSync(join(tmpdir(), 'preview-banner-'));
const gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(defaultWorkDir(dataDir), { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

describe('npm start', () => {
  test('prints the dashboard URL and the first commands; removes working copies no environment owns', async () => {
    // What a deleted data dir leaves behind: an environment's working copy in the work dir outside it.
    const stale = join(defaultWorkDir(dataDir), 'org-gone', 'acme', 'web', '7', 'web-abc');
    mkdirSync(stale, { recursive: true });
    writeFileSync(join(stale, 'server.js'), '');
    const server = await startProcess(dataDir, {
      PREVIEW_GIT_ROOT: gitRoot,
      PREVIEW_APP_PORTS: '40000-40999',
      PREVIEW_ORG_REQUESTS_PER_SECOND: '7',
      PREVIEW_ORG_CONCURRENT_DEPLOYS: '0',
      PREVIEW_ORG_CONCURRENT_RUNS: '3',
    });
    try {
      const until = Date.now() + 20_000;
      while (!server.stderr().includes('previewctl --help') && Date.now() < until)
        await new Promise((r) => setTimeout(r, 50));
      const banner = server.stderr();
      expect(banner).toContain(
        `  dashboard:   ${server.url}/ (the API key is in ${join(dataDir, 'credentials.json')})`,
      );
      expect(banner).toContain(
        `  next:        a git repository at ${gitRoot}/OWNER/REPO with a preview.yaml, then\n`,
      );
      expect(banner).toContain('npx previewctl apps create --repo OWNER/REPO\n');
      expect(banner).toContain('npx previewctl envs deploy --repo OWNER/REPO --pr 1 --wait\n');
      // The fair share it applies, each limit with the variable that sets it.
      expect(banner).toContain(
        '  fair share per organization: 7 requests/s (PREVIEW_ORG_REQUESTS_PER_SECOND), no limit of deploys ' +
          'in flight (PREVIEW_ORG_CONCURRENT_DEPLOYS), 3 runs in flight (PREVIEW_ORG_CONCURRENT_RUNS); past ' +
          'one, 429 (0 turns a limit off)\n',
      );
      // The browser and encoder test runs use (Debian's, or the packaged ones npm ci installed).
      expect(banner).toMatch(
        /\n {2}test runs: browser (Debian's chromium \/\S+|packaged Chromium \(@sparticuz\/chromium, unpacked on first run\)), video with (packaged )?ffmpeg \/\S+/,
      );
      // Recovery runs at start, before the banner's server answers its first deploy.
      const gone = Date.now() + 10_000;
      while (existsSync(stale) && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
      expect(existsSync(join(defaultWorkDir(dataDir), 'org-gone'))).toBe(false);
    } finally {
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 60_000);

  test('a bad PREVIEW_APP_PORTS: exit 1 at once, naming the variable and the form it takes', async () => {
    const other = mkdtempSync(join(tmpdir(), 'preview-banner-bad-'));
    try {
      const { code, stderr } = await startToExit({
        PORT: '0',
        PREVIEW_DATA_DIR: other,
        PREVIEW_APP_PORTS: '40999-40000',
      });
      expect(code).toBe(1);
      expect(stderr).toContain('PREVIEW_APP_PORTS: must be FIRST-LAST with 1024 <= FIRST <= LAST <= 65535');
    } finally {
      rmSync(other, { recursive: true, force: true });
      rmSync(defaultWorkDir(other), { recursive: true, force: true });
    }
  }, 60_000);
});
