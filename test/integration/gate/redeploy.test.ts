import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { bearer, call } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { checkRuns, completedCheckRun, outputOf } from '../../support/check-runs.js';
import { haveChromium, launchChromium } from '../../support/chromium.js';
import { commitFiles } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';
import { RUNS_APP_JS } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';

/*
 * A new deploy of the same head commit (a whole redeploy through the API) runs the head's
 * `run_on_preview` tests again: the gate tells the runs of the deploy the pull request now has, on a
 * fresh check run, and the completed one before it stays as it ended. The dashboard's per-commit view
 * (the new check run's details_url) tells the new story too, in chromium. GATE_SHOTS=<dir> keeps its
 * screenshot.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/gateredeploy' });
beforeAll(async () => {
  await app.importTest({ name: 'Sign up passes', run_on_preview: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});
let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;

const envPath = (pr: number) => `/v1/preview/environments/${app.repo}/${pr}`;
const settled = (pr: number) =>
  pollUntil(h, h.org, envPath(pr), (s) => s.status === 'ready' || s.status === 'failed', 90_000);

async function redeploy(pr: number) {
  const res = await call(h, 'PATCH', envPath(pr), { headers: bearer(h.org) });
  expect(res.status).toBe(202);
}
/** The report run ids a check run's summary links to. */
const runIdsOf = (summary: string) => [...summary.matchAll(/\/report\/([a-z0-9]{20,})\?/g)].map((m) => m[1]);

describe('a new deploy of the same head', () => {
  test('tells its own runs on a fresh check run; the completed one before it gets no write', async () => {
    const sha = commitFiles(h.gitRoot, app.repo, {
      'server.js': RUNS_APP_JS.replace('Sign up</h1>', 'Sign up again</h1>'),
    });
    await requestDeploy(h, app.repo, 31, sha);
    const first = await completedCheckRun(h.dataDir, sha, 1);
    expect(first.body).toMatchObject({ conclusion: 'success', external_id: expect.stringMatching(/\/1$/) });
    const firstCalls = checkRuns(h.dataDir, sha)[0]!.calls.length;

    // A test that fails joins the application; the same head is deployed again and its tests run again.
    await app.importTest({
      name: 'Heading fails',
      run_on_preview: true,
      step_timeout_seconds: 2,
      steps: [{ interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' }],
    });
    await redeploy(31);
    const second = await completedCheckRun(h.dataDir, sha, 2);
    expect(second.body).toMatchObject({
      status: 'completed',
      conclusion: 'failure',
      external_id: expect.stringMatching(/\/2$/),
    });
    expect(outputOf(second).title).toBe('1 test failed of 2');
    // Its runs are the new deploy's: none of the first story's.
    const before = runIdsOf(outputOf(first).summary);
    expect(before).toHaveLength(1);
    expect(runIdsOf(outputOf(second).summary)).not.toContain(before[0]);
    const [old, fresh] = checkRuns(h.dataDir, sha);
    expect(old!.calls).toHaveLength(firstCalls);
    expect(fresh!.calls.filter((l) => l.body.status === 'completed')).toHaveLength(1);
  }, 240_000);

  test('a preview that failed, redeployed once its secret is set: the fresh story tells the tests', async () => {
    // Its apps will not start without their secret: the first deploy of this head fails.
    const sha = commitFiles(h.gitRoot, app.repo, {
      'server.js': `if (!process.env.GREETING) process.exit(3);\n${RUNS_APP_JS}`,
    });
    await requestDeploy(h, app.repo, 32, sha);
    expect((await settled(32)).status).toBe('failed');
    const failed = await completedCheckRun(h.dataDir, sha, 1);
    expect(failed.body).toMatchObject({ conclusion: 'failure' });
    expect(outputOf(failed).title).toBe('The preview failed: no test ran against it');

    for (const name of ['web', 'api']) {
      const put = await call(h, 'PUT', `/v1/preview/secrets/${app.applicationId}/${name}`, {
        headers: bearer(h.org),
        body: { items: [{ key: 'GREETING', value: 'hello' }] },
      });
      expect(put.status).toBe(200);
    }
    await redeploy(32);
    const after = await settled(32);
    expect([after.status, after.error]).toEqual(['ready', undefined]);
    const end = await completedCheckRun(h.dataDir, sha, 2);
    expect(end.body).toMatchObject({ status: 'completed', external_id: expect.stringMatching(/\/2$/) });
    // The tests ran against the preview this time: one passes, the failing one fails.
    expect(outputOf(end).title).toBe('1 test failed of 2');
    expect(outputOf(end).summary).toContain('| Sign up passes | `passed` |');

    // The page the check run links to tells the new story, not the failed preview.
    if (!haveChromium()) return;
    browser = await launchChromium();
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 720 } })).newPage();
    await page.goto(end.body.details_url as string);
    await page.fill('#apiKey', h.org.apiKey);
    await page.click('#credentials button[type=submit]');
    await page.locator('#commitRuns tbody tr[data-test]').nth(1).waitFor({ timeout: 20_000 });
    expect(await page.textContent('#commitTitle')).toBe('1 test failed of 2');
    // Its second check run on this head, not a re-run: nobody pressed Re-run.
    expect(await page.textContent('#commitGate')).toContain(' · check run 2 · completed');
    // The hint the page gave before it had a key is gone once it has one.
    expect(await page.textContent('#status')).toBe('');
    expect(await page.textContent('#commitGate')).not.toContain('The preview failed');
    const rows = await page
      .locator('#commitRuns tbody tr[data-test]')
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-test')));
    expect(rows.sort()).toEqual(['Heading fails', 'Sign up passes']);
    if (process.env.GATE_SHOTS)
      writeFileSync(
        join(process.env.GATE_SHOTS, 'per-commit-redeployed.png'),
        await page.screenshot({ fullPage: true }),
      );
  }, 240_000);
});
