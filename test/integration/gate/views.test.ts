import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { bearer, call, client } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { completedCheckRun } from '../../support/check-runs.js';
import { haveChromium as chromiumHere, launchChromium } from '../../support/chromium.js';
import { commitFiles } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';
import { decodePng } from '../../support/png.js';
import { RUNS_APP_JS } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';
import { closeSnapshots, snapshot } from '../../support/stored-state.js';

/*
 * What people read of the merge gate besides GitHub, through the local server: one head commit's gate
 * (GET …/{pr}/gate?commit=…: state, title, each run with its report link, a quarantined failure marked),
 * the environment's `gate` field (its latest head's check run), and the dashboard's per-commit view that
 * the check run's details_url opens, in chromium. GATE_SHOTS=<dir> keeps the screenshots.
 */

const SHOTS = process.env.GATE_SHOTS ?? mkdtempSync(join(tmpdir(), 'preview-gate-shots-'));
const chromiumTest = chromiumHere() ? test : test.skip;
const h = localServerForFile();
const REPO = 'acme/views';
const app = runsAppForFile(h, { repo: REPO });
const ENV = `/v1/preview/environments/${REPO}`;
let sha: string;
let detailsUrl: string;
let browser: Browser | undefined;
let page: Page;

/** Wait until the per-commit view's gate says what `re` matches. */
async function commitSays(re: RegExp): Promise<void> {
  const deadline = Date.now() + 20_000;
  let text = '';
  do {
    text = (await page.textContent('#commitGate')) ?? '';
    if (re.test(text)) return;
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  throw new Error(`#commitGate never matched ${re}: ${JSON.stringify(text)}`);
}

const get = (path: string, org = h.org) => call(h, 'GET', path, { headers: bearer(org) });

async function prReady(pr: number, label: string) {
  const head = commitFiles(h.gitRoot, app.repo, {
    'server.js': RUNS_APP_JS.replace('Sign up</h1>', `Sign up ${label}</h1>`),
  });
  await requestDeploy(h, app.repo, pr, head);
  await pollUntil(h, h.org, `${ENV}/${pr}`, (s) => s.status === 'ready', 90_000);
  return head;
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  if (chromiumHere()) {
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 720 } })).newPage();
  }
}, 60_000);
afterAll(async () => {
  await browser?.close();
  closeSnapshots();
});

describe('the environment’s gate field', () => {
  test('absent while the application has no run_on_preview tests', async () => {
    await app.importTest({ name: 'Not on previews' });
    await prReady(1, 'plain');
    const status = await get(`${ENV}/1`);
    expect(status.status).toBe(200);
    expect(status.body).not.toHaveProperty('gate');
    const listed = (await get('/v1/preview/environments')).body.environments;
    expect(listed.find((e: { prNumber: number }) => e.prNumber === 1)).not.toHaveProperty('gate');
  }, 120_000);

  test('the latest head’s check run once it has them: status, conclusion, the title GitHub shows', async () => {
    await app.importTest({ name: 'Sign up passes', run_on_preview: true });
    const failing = await app.importTest({
      name: 'Heading fails',
      run_on_preview: true,
      step_timeout_seconds: 2,
      steps: [{ interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' }],
    });
    const q = await call(h, 'PUT', `/test/${failing}/quarantine`, {
      headers: client(h.org),
      body: { owner: 'alice', reason: 'flaky heading' },
    });
    expect(q.status).toBe(200);
    sha = await prReady(2, 'gated');
    const end = await completedCheckRun(h.dataDir, sha);
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'success' });
    detailsUrl = end.body.details_url as string;
    const title = '1 test passed, 1 quarantined failure ignored';
    expect((end.body.output as { title: string }).title).toBe(title);
    const gate = { status: 'completed', conclusion: 'success', title, headSha: sha };
    expect((await get(`${ENV}/2`)).body.gate).toEqual(gate);
    const listed = (await get('/v1/preview/environments')).body.environments;
    expect(listed.find((e: { prNumber: number }) => e.prNumber === 2).gate).toEqual(gate);
  }, 240_000);
});

describe('GET …/{pr}/gate: one head commit’s gate', () => {
  test('its state, title and runs, each with a report link that opens; a quarantined failure marked', async () => {
    const res = await get(`${ENV}/2/gate?commit=${sha}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      repoFullName: app.repo,
      prNumber: 2,
      sha,
      story: 1,
      status: 'completed',
      conclusion: 'success',
      title: '1 test passed, 1 quarantined failure ignored',
    });
    const byName = Object.fromEntries(res.body.runs.map((r: { name: string }) => [r.name, r]));
    expect(byName['Sign up passes']).toMatchObject({ status: 'passed', retries: 0, flaky: false });
    expect(byName['Sign up passes'].durationMs).toBeGreaterThan(0);
    expect(byName['Heading fails']).toMatchObject({
      status: 'failed',
      quarantine: { owner: 'alice', reason: 'flaky heading' },
      failedStep: { number: 1, interaction: 'assert-text' },
    });
    const report = await fetch(byName['Heading fails'].reportUrl);
    expect(report.status).toBe(200);
    expect(await report.text()).toContain('Heading fails');
    // Without a commit: the latest head's.
    expect((await get(`${ENV}/2/gate`)).body.sha).toBe(sha);
  });

  test('bad input is a clear 4xx, another organization’s is 404, and nothing stored changes', async () => {
    const other = await h.newOrg('views-other');
    const before = await snapshot(h.dataDir);
    const cases: [string, number, RegExp, typeof h.org?][] = [
      [`${ENV}/2/gate?commit=xyz`, 400, /commit: must be a full commit SHA/],
      [`${ENV}/2/gate?commit=${sha.slice(0, 12)}`, 400, /must be a full commit SHA/],
      [`${ENV}/2/gate?commit=${sha}&story=1`, 400, /unknown parameter "story"/],
      [`${ENV}/0x2/gate`, 400, /pr/],
      [`${ENV}/2/gate?commit=${'0'.repeat(40)}`, 404, /that commit has no check run/],
      [`${ENV}/1/gate`, 404, /no check run yet/],
      [`${ENV}/9/gate`, 404, /environment not found/],
      [`${ENV}/2/gate?commit=${sha}`, 404, /environment not found/, other],
    ];
    for (const [path, status, error, org] of cases) {
      const res = await get(path, org);
      expect([path, res.status]).toEqual([path, status]);
      expect(res.body).toEqual({ error: expect.stringMatching(error) });
    }
    expect((await call(h, 'GET', `${ENV}/2/gate`)).status).toBe(401);
    expect((await get(`${ENV}/2`, other)).status).toBe(404);
    expect(await snapshot(h.dataDir)).toEqual(before);
  });
});

describe('the signed page of a head’s gate (details_url in AWS), served locally too', () => {
  test('opens with its link; a tampered one is 403', async () => {
    const { commitPageLink } = await import('../../../functions/core/gate/index.js');
    const { mediaReader } = await import('../../../functions/ports/registry/media.js');
    const link = await commitPageLink(mediaReader(), h.url, {
      orgId: h.org.orgId,
      repoFullName: REPO,
      prNumber: 2,
      sha,
    });
    const page = await fetch(link);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<span id="title">1 test passed, 1 quarantined failure ignored</span>');
    expect(html).toContain('Owner alice');
    expect((await fetch(link.replace('/2/', '/3/'))).status).toBe(403);
  });
});

describe('the dashboard’s per-commit view (the check run’s details_url), in chromium', () => {
  chromiumTest(
    'opens that environment alone with that head’s gate and runs',
    async () => {
      expect(detailsUrl).toBe(`${h.url}/?${new URLSearchParams({ env: `${app.repo}#2`, commit: sha })}`);
      await page.goto(`${h.url}/`);
      await page.fill('#apiKey', h.org.apiKey);
      await page.click('#credentials button[type=submit]');
      // The list: the pull request's row shows its gate, linking to the per-commit view.
      const gateLink = page.locator(`#environments tr[data-env="${app.repo} #2"] .gate a`);
      await gateLink.waitFor({ timeout: 20_000 });
      expect(await gateLink.textContent()).toBe('1 test passed, 1 quarantined failure ignored');
      expect(new URL((await gateLink.getAttribute('href'))!, h.url).href).toBe(detailsUrl);

      await page.goto(detailsUrl);
      await page.locator('#commitRuns tbody tr[data-test]').nth(1).waitFor({ timeout: 20_000 });
      expect(await page.textContent('#commit-title')).toBe(
        `Merge gate of ${app.repo} #2 at ${sha.slice(0, 7)}`,
      );
      expect(await page.textContent('#commitTitle')).toBe('1 test passed, 1 quarantined failure ignored');
      expect(await page.textContent('#commitGate')).toContain(sha);
      // Only that environment; the recent runs and the start form give way to its runs.
      expect(await page.locator('#environments tbody tr').count()).toBe(1);
      expect(await page.locator('#environments tbody tr').getAttribute('data-env')).toBe(`${app.repo} #2`);
      expect(await page.isVisible('#runs')).toBe(false);
      expect(await page.isVisible('#start')).toBe(false);
      const failed = page.locator('#commitRuns tr[data-test="Heading fails"]');
      expect(await failed.textContent()).toMatch(
        /failed quarantinedDoes not fail the gate\. Owner alice, until \d{4}-\d\d-\d\d: flaky heading/,
      );
      expect(await failed.textContent()).toContain('step 1 (assert-text) failed');
      const passed = page.locator('#commitRuns tr[data-test="Sign up passes"]');
      expect(await passed.locator('td').nth(2).textContent()).toMatch(/^\d+\.\d s$/);
      expect(await passed.locator('td').nth(3).textContent()).toBe('0');
      const report = await passed.locator('a').getAttribute('href');
      expect(report).toMatch(new RegExp(`^${h.url}/report/`));
      expect((await fetch(report!)).status).toBe(200);
      const png = await page.screenshot({ fullPage: true });
      writeFileSync(join(SHOTS, 'per-commit-view.png'), png);
      expect(decodePng(png).width).toBe(1280);
      // Secrets: the page holds no credential it was given beyond the form field.
      expect(await page.textContent('main')).not.toContain(h.org.apiKey);
    },
    60_000,
  );

  chromiumTest(
    'a skip shows who and why, in the environment’s gate and the per-commit view',
    async () => {
      const skip = await call(h, 'POST', `${ENV}/2/gate/skip`, {
        headers: bearer(h.org),
        body: { by: 'alice', reason: 'release freeze' },
      });
      expect(skip.status).toBe(200);
      expect((await get(`${ENV}/2`)).body.gate).toEqual({
        status: 'completed',
        conclusion: 'neutral',
        title: 'Skipped by alice: release freeze',
        headSha: sha,
      });
      await page.goto(detailsUrl);
      const deadline = Date.now() + 20_000;
      while (!(await page.isVisible('#commitSkip')) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      expect(await page.textContent('#commitSkip')).toBe(
        'alice skipped the tests of this commit: release freeze. A skip completes the check run neutral, which is not a pass.',
      );
      expect(await page.textContent('#commitTitle')).toBe('Skipped by alice: release freeze');
      expect(await page.locator('#commitGate .badge').allTextContents()).toEqual(['completed', 'neutral']);
      // The runs it skipped stay listed.
      expect(await page.locator('#commitRuns tbody tr[data-test]').count()).toBe(2);
      writeFileSync(join(SHOTS, 'per-commit-skipped.png'), await page.screenshot({ fullPage: true }));
    },
    60_000,
  );

  chromiumTest(
    'a head without a check run, or an address it cannot read, says so',
    async () => {
      await page.goto(`${h.url}/?${new URLSearchParams({ env: `${app.repo}#2`, commit: '0'.repeat(40) })}`);
      await commitSays(/that commit has no check run/);
      await page.goto(`${h.url}/?env=nonsense&commit=${sha}`);
      await commitSays(/names no environment/);
    },
    60_000,
  );
});
