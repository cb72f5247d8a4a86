import { describe, expect, test } from '@jest/globals';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded, step } from '../../support/runs-app.js';
import { startRun } from '../../support/runs-suite.js';

/*
 * Cold starts: a run against a preview that fell asleep. The preview is woken, and its app waited for,
 * before the first step (bounded by PREVIEW_WAKE_TIMEOUT_SECONDS, 8 s here), so a wake slower than the
 * first step's own timeout (2 s) still passes, and the wait is on the run's record. A wake that never
 * comes fails the run naming the environment, not a step, with `error_kind: environment`.
 *
 * The app: its first start answers at once and leaves a marker in its working copy; a later start (a
 * wake) answers after WAKE_DELAY_MS, or never when WAKE_DELAY_MS is `never`.
 */

const SLOW_APP_JS = `
const fs = require('node:fs');
const http = require('node:http');
const woken = fs.existsSync('.started');
fs.writeFileSync('.started', 'x');
const delay = woken ? process.env.WAKE_DELAY_MS : '0';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>Shop</title><h1 id="hello">Open for business</h1>');
});
if (delay === 'never') setInterval(() => undefined, 60_000);
else setTimeout(() => server.listen(Number(process.env.PORT), '127.0.0.1'), Number(delay));
`;

const h = localServerForFile({
  env: { PREVIEW_WAKE_TIMEOUT_SECONDS: '8', PREVIEW_READY_TIMEOUT_SECONDS: '20' },
});

/** A PR preview of a one-app repository whose wake takes `delay` ms, deployed, then asleep. */
async function sleepingPreview(repo: string, delay: string) {
  const sha = makeRepo(h.gitRoot, repo, {
    'preview.yaml': `apps:\n  web:\n    port: 3000\n    command: node server.js\n    env:\n      WAKE_DELAY_MS: "${delay}"\n`,
    'server.js': SLOW_APP_JS,
  });
  const applicationId = await linkRepo(h.org, repo);
  // Asleep after about 6 s without a request (more than the browser takes to start after the wake).
  await updateApplication(h.org.orgId, applicationId, { sleepAfterMinutes: 0.1 });
  const res = await call(h, 'POST', '/v1/preview/environments', {
    headers: bearer(h.org),
    body: { repoFullName: repo, prNumber: 3, headSha: sha, headRef: 'pr-3' },
  });
  expect(res.status).toBe(202);
  const ready = await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${repo}/3`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  expect(ready.status).toBe('ready');
  const asleep = await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${repo}/3`,
    (s) => typeof (s as { asleepAt?: string }).asleepAt === 'string',
    30_000,
  );
  const out = await importTests(h.org.orgId, [
    {
      name: 'The shop opens',
      folder: { id: 'shop', name: 'Shop' },
      application_id: applicationId,
      application_version: { name: 'web', path: '/' },
      step_timeout_seconds: 2,
      steps: [
        step('navigate', 'Open the shop', { url: '/' }),
        step('assert-text', 'The page says "Open for business"', { selector: '#hello' }),
      ],
    },
  ]);
  return { testId: out.tests[0]!.id, environmentId: (asleep as { environmentId?: string }).environmentId };
}

describe('a run against a sleeping preview', () => {
  test('a wake slower than the first step (3.5 s against 2 s) still passes; the wait is recorded', async () => {
    const { testId, environmentId } = await sleepingPreview('acme/slowwake', '3500');
    const { run_id } = await startRun(h, testId, { application_version_id: environmentId });
    const run = await runEnded(h, run_id);
    expect([run.status, run.error]).toEqual(['passed', undefined]);
    expect(run.steps.map((s: { status: string }) => s.status)).toEqual(['passed', 'passed']);
    // The wait: longer than the step's timeout, with when the app answered.
    expect(run.metadata.wake.waited_ms).toBeGreaterThanOrEqual(3_000);
    expect(Object.keys(run.metadata.wake.apps)).toEqual(['web']);
    expect(run.metadata.error_kind).toBeUndefined();
  }, 150_000);

  test('a wake that never comes: failed, the error names the environment, not a step', async () => {
    const { testId, environmentId } = await sleepingPreview('acme/nowake', 'never');
    const started = Date.now();
    const { run_id } = await startRun(h, testId, { application_version_id: environmentId });
    const run = await runEnded(h, run_id);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(
      'the preview environment acme/nowake#3 did not wake within 8 s (PREVIEW_WAKE_TIMEOUT_SECONDS)',
    );
    expect(run.metadata.error_kind).toBe('environment');
    // No step ran: the environment failed the run before the first one.
    expect(run.steps.map((s: { status: string }) => s.status)).toEqual(['skipped', 'skipped']);
    expect(Date.now() - started).toBeLessThan(60_000);
  }, 150_000);
});
