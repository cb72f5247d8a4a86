import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { call } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { previewctl, startProcess, stopProcess } from '../../support/process.js';
import { RUNS_APP_JS, RUNS_APP_YAML, step } from '../../support/runs-app.js';

/*
 * `npm start` as a child process, stopped (SIGTERM) while a test run is in its browser and started again:
 * the run is not left running (it ended failed saying the service stopped). Tests are imported with
 * `previewctl tests import --app`.
 */

let dataDir: string;
let gitRoot: string;
beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'preview-runs-restart-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-runs-restart-git-'));
});
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

/** Whether a chromium that `pid` launched (Playwright gives it a debugging pipe) is running. */
function childBrowser(pid: number): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('--remote-debugging-pipe'))
        return true;
    } catch {
      // gone meanwhile
    }
  }
  return false;
}

test('a run in progress when npm start is stopped ends failed with the reason; after the restart too', async () => {
  makeRepo(gitRoot, 'acme/restart', { 'preview.yaml': RUNS_APP_YAML, 'server.js': RUNS_APP_JS });
  let server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
  try {
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const app = await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', 'acme/restart');
    expect(app.code).toBe(0);
    const deploy = await call(server, 'POST', `/v1/preview/applications/${app.out.applicationId}/0`, {
      headers: { authorization: `Bearer ${creds.apiKey}` },
    });
    expect(deploy.status).toBe(202);
    await pollUntil(
      server,
      creds,
      '/v1/preview/environments/acme/restart/0',
      (s) => s.status === 'ready',
      60_000,
    );

    const file = join(dataDir, 'tests.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          name: 'Waits a long time',
          folder: { id: 'slow', name: 'Slow' },
          application_version: { name: 'web', path: '/' },
          step_timeout_seconds: 120,
          steps: [step('wait-for', 'Something that never comes', { selector: '#never' })],
        },
      ]),
    );
    // previewctl runs in the data dir: the file is named relative to it.
    const imported = await previewctl(
      dataDir,
      ...['tests', 'import', '--org', creds.orgId, '--app', app.out.applicationId, 'tests.json'],
    );
    expect(imported).toMatchObject({ code: 0 });
    const headers = { 'svc-client-id': creds.clientId, 'svc-client-secret': creds.clientSecret };
    const testId = imported.out.tests[0].id;
    expect((await call(server, 'GET', `/test/${testId}`, { headers })).body.application_id).toBe(
      app.out.applicationId,
    );
    const started = await call(server, 'POST', `/test/${testId}/run`, { headers });
    expect(started.status).toBe(201);
    const runId = started.body.run_id;
    const deadline = Date.now() + 30_000;
    while ((await call(server, 'GET', `/run/${runId}`, { headers })).body.status !== 'running') {
      if (Date.now() > deadline) throw new Error('the run never started running');
      await new Promise((r) => setTimeout(r, 100));
    }
    // In the browser, waiting: the server's chromium is up, and a moment later on its step.
    const pid = server.proc.pid!;
    while (!childBrowser(pid)) {
      if (Date.now() > deadline) throw new Error('no browser started');
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 3_000));

    expect(await stopProcess(server.proc, 'SIGTERM')).toBe(0);
    server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
    const run = await call(server, 'GET', `/run/${runId}?steps=true`, { headers });
    // On its first step, or (a busy machine) still opening the first page in its warm browser.
    expect(run.body.status).toBe('failed');
    expect(run.body.error).toMatch(
      /^the browser died (during step 1 \(wait-for\)|while opening the first page): the service stopped while the run was running$/,
    );
    expect(run.body.steps[0].status).toMatch(/^(failed|skipped)$/);
    expect((await call(server, 'GET', '/run?status=running', { headers })).body).toEqual([]);
  } finally {
    await stopProcess(server.proc, 'SIGTERM');
  }
}, 120_000);
