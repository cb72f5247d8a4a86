import { afterAll, describe, expect, test } from '@jest/globals';
import type { OutboxLine } from '../../../functions/ports/pr-status/local-outbox.js';
import { bearer, call, client } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { checkRuns, completedCheckRun, outbox as outboxOf, outputOf } from '../../support/check-runs.js';
import { commitFiles } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';
import { RUNS_APP_JS, RUNS_APP_YAML } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';
import { closeSnapshots, snapshot } from '../../support/stored-state.js';

/*
 * The merge gate through the local server: the check run `Preview tests` of each head commit, as the
 * local outbox records its POST and PATCHes, from queued to one conclusion.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/gate' });
afterAll(closeSnapshots);

const outbox = () => outboxOf(h.dataDir);
/** The calls of the head's check run: its POST, then its PATCHes. */
const checkRunCalls = (sha: string) => checkRuns(h.dataDir, sha)[0]?.calls ?? [];
/** Wait until the head's check run completed; its calls. */
async function completed(sha: string): Promise<OutboxLine[]> {
  await completedCheckRun(h.dataDir, sha);
  return checkRunCalls(sha);
}
const last = (calls: OutboxLine[]) => calls[calls.length - 1]!;

async function prReady(pr: number, sha: string) {
  await requestDeploy(h, app.repo, pr, sha);
  return pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${app.repo}/${pr}`,
    (s) => s.status === 'ready' || s.status === 'failed',
    90_000,
  );
}

const commit = (label: string) =>
  commitFiles(h.gitRoot, app.repo, {
    'server.js': RUNS_APP_JS.replace('Sign up</h1>', `Sign up ${label}</h1>`),
  });

describe('the check run of a head commit', () => {
  test('an application without run_on_preview tests gets no check run', async () => {
    await app.importTest({ name: 'Not on previews' });
    const sha = commit('none');
    const env = await prReady(1, sha);
    expect(env.status).toBe('ready');
    // The deploy was reported on the pull request, and no check run was made for it.
    await new Promise((r) => setTimeout(r, 1500));
    expect(outbox().some((l) => l.path.includes('/deployments'))).toBe(true);
    expect(outbox().filter((l) => l.path.includes('/check-runs'))).toEqual([]);
  }, 120_000);

  test('skipping the tests of that head from the API: 409, nothing stored changes, no GitHub call', async () => {
    const before = await snapshot(h.dataDir);
    const calls = outbox().length;
    const res = await call(h, 'POST', `/v1/preview/environments/${app.repo}/1/gate/skip`, {
      headers: bearer(h.org),
      body: { by: 'alice', reason: 'release freeze' },
    });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.stringMatching(/head has no check run to skip/) });
    expect(await snapshot(h.dataDir)).toEqual(before);
    expect(outbox()).toHaveLength(calls);
  });

  test('every test passed: in_progress while they run, then success; the time to completion measured', async () => {
    await app.importTest({ name: 'Sign up on previews', run_on_preview: true });
    const sha = commit('pass');
    await prReady(2, sha);
    const calls = await completed(sha);
    const [post] = calls;
    expect(post).toMatchObject({
      method: 'POST',
      path: `/repos/acme/gate/check-runs`,
      body: { name: 'Preview tests', head_sha: sha },
    });
    expect(calls.map((l) => l.body.status)).toContain('in_progress');
    const end = last(calls);
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'success' });
    expect(outputOf(end).title).toBe('1 test passed');
    expect(outputOf(end).summary).toContain('| Sign up on previews | `passed` |');
    // Completed once and only once.
    expect(calls.filter((l) => l.body.status === 'completed')).toHaveLength(1);

    // Its links: the dashboard's view of the head commit, and the run's report (signed), which opens.
    expect(end.body.details_url).toBe(
      `${h.url}/?${new URLSearchParams({ env: 'acme/gate#2', commit: sha })}`,
    );
    const dashboard = await fetch(end.body.details_url as string);
    expect(dashboard.status).toBe(200);
    expect(await dashboard.text()).toContain('<title>Preview environments</title>');
    const report = /\[report\]\(([^)]+)\)/.exec(outputOf(end).summary)![1]!;
    expect(report.startsWith(`${h.url}/report/`)).toBe(true);
    const page = await fetch(report);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Sign up on previews');
    const runId = /\/report\/([a-z0-9]{20,})\?/.exec(report)![1]!;
    const run = (await call(h, 'GET', `/run/${runId}`, { headers: client(h.org) })).body;
    const ms = Date.parse(end.time) - Date.parse(run.ended_at);
    expect(ms).toBeGreaterThanOrEqual(0);
    // The figure the closing note quotes: from the last run's end to the completed check run.
    console.log(`merge gate: last run ended → check run completed in ${ms} ms`);
  }, 180_000);

  test('a failing test fails the gate, with its failed step and error in the text', async () => {
    await app.importTest({
      name: 'Heading on previews',
      run_on_preview: true,
      step_timeout_seconds: 2,
      steps: [{ interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' }],
    });
    const sha = commit('fail');
    await prReady(3, sha);
    const end = last(await completed(sha));
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'failure' });
    expect(outputOf(end).title).toBe('1 test failed of 2');
    expect(outputOf(end).text).toContain('### Heading on previews');
    expect(outputOf(end).text).toContain('Failed step 1 (`assert-text`)');
    expect(outputOf(end).text).toContain('"Nowhere to be seen" not found');
    // Its screenshot: the run's report at the failed step's row, which opens and shows it.
    const shot = /\[Screenshot\]\(([^)]+)\)/.exec(outputOf(end).text ?? '')?.[1];
    expect(shot).toMatch(new RegExp(`^${h.url}/report/[a-z0-9]+\\?[^#]+#step-1$`));
    const page = await fetch(shot!);
    expect(page.status).toBe(200);
    const row = /<tr id="step-1">([\s\S]*?)<\/tr>/.exec(await page.text())?.[1];
    expect(row).toContain('<img');
    expect(end.body.actions).toEqual([
      expect.objectContaining({ identifier: 'rerun-failed', label: 'Re-run failed tests' }),
    ]);
  }, 180_000);

  test('a failed preview fails the gate, and its title says the preview failed, not a test', async () => {
    const sha = commitFiles(h.gitRoot, app.repo, { 'preview.yaml': 'apps: [' });
    const env = await prReady(4, sha);
    expect(env.status).toBe('failed');
    const end = last(await completed(sha));
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'failure' });
    expect(outputOf(end).title).toBe('The preview failed: no test ran against it');
    // Restore the repository for the tests after this one.
    commitFiles(h.gitRoot, app.repo, { 'preview.yaml': RUNS_APP_YAML });
  }, 180_000);
});
