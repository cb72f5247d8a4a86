import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { call } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { checkRuns } from '../../support/check-runs.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { defaultWorkDir, previewctl, startProcess, stopProcess } from '../../support/process.js';
import { RUNS_APP_JS, RUNS_APP_YAML, step } from '../../support/runs-app.js';

/*
 * `npm start` as a child process, killed (SIGKILL: no shutdown of its own) while a pull request's preview
 * run is in its browser, then started again: the run is recovered (ended failed) and the head's check run,
 * `in_progress` when the server died, is completed after the restart.
 */

let dataDir: string;
let gitRoot: string;
beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'preview-gate-crash-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-gate-crash-git-'));
});
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(defaultWorkDir(dataDir), { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

/** The calls of the head's first check run: its POST, then its PATCHes. */
const checkRunCalls = (sha: string) => checkRuns(dataDir, sha)[0]?.calls ?? [];
async function until<T>(what: string, probe: () => T | undefined, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a server killed mid-runs: after the restart the check run still completes', async () => {
  makeRepo(gitRoot, 'acme/crash', { 'preview.yaml': RUNS_APP_YAML, 'server.js': RUNS_APP_JS });
  let server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
  try {
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const auth = { authorization: `Bearer ${creds.apiKey}` };
    const app = await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', 'acme/crash');
    expect(app.code).toBe(0);
    writeFileSync(
      join(dataDir, 'tests.json'),
      JSON.stringify([
        {
          name: 'Waits a long time',
          folder: { id: 'slow', name: 'Slow' },
          application_version: { name: 'web', path: '/' },
          run_on_preview: true,
          step_timeout_seconds: 120,
          steps: [step('wait-for', 'Something that never comes', { selector: '#never' })],
        },
      ]),
    );
    const imported = await previewctl(
      dataDir,
      ...['tests', 'import', '--org', creds.orgId, '--app', app.out.applicationId, 'tests.json'],
    );
    expect(imported).toMatchObject({ code: 0 });

    const sha = commitFiles(gitRoot, 'acme/crash', { VERSION: 'pr' });
    const deploy = await call(server, 'POST', '/v1/preview/environments', {
      headers: auth,
      body: { repoFullName: 'acme/crash', prNumber: 9, headSha: sha, headRef: 'feature' },
    });
    expect(deploy.status).toBe(202);
    await pollUntil(
      server,
      creds,
      '/v1/preview/environments/acme/crash/9',
      (s) => s.status === 'ready',
      90_000,
    );
    // The run is in its browser and the check run in progress.
    await until('the check run in progress', () =>
      checkRunCalls(sha).some((l) => l.body.status === 'in_progress') ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, 2_000));
    expect(checkRunCalls(sha).some((l) => l.body.status === 'completed')).toBe(false);

    await stopProcess(server.proc, 'SIGKILL');
    server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
    const end = await until('the completed check run', () =>
      checkRunCalls(sha).find((l) => l.body.status === 'completed'),
    );
    expect(end.body.conclusion).toBe('failure');
    const output = end.body.output as { title: string; text: string };
    expect(output.title).toBe('1 test failed of 1');
    expect(output.text).toMatch(/interrupted: the service restarted while the run was running/);
  } finally {
    await stopProcess(server.proc, 'SIGTERM');
  }
}, 240_000);
