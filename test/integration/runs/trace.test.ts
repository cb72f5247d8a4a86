import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { readZip } from '../../../functions/ports/browser/trace-zip.js';
import { call, client } from '../../support/api.js';
import { launchChromium } from '../../support/chromium.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded, signUpSteps, step } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';

/*
 * The trace through the local server: each run stores a Playwright trace (a masked zip, `trace_url` with
 * media=true); the report links the run and each step to the trace viewer the server serves from its own
 * origin, which opens the trace in chromium and lists each step's actions; a step's console errors and
 * failed requests are on the step (metadata) and on the report.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/trace' });
let passed: any;
let failed: any;
const shots = process.env.RUN_REPORT_SHOTS ?? tmpdir();
const TOKEN = 'tok-5e1f-signup-value';

beforeAll(async () => {
  // A variable whose name says it is a secret: masked in outputs and in the trace.
  const ok = await app.importTest({
    name: 'Sign up (traced)',
    variables: { EMAIL: 'saved@example.com', SIGNUP_TOKEN: TOKEN },
    steps: [
      step('navigate', 'Open the sign-up page', { url: '/' }),
      step('input-text', 'Type {{variable:SIGNUP_TOKEN}} into the email field', { selector: '#email' }),
      step('click', 'Click Sign up', { selector: '#submit' }),
      step('assert-text', 'The page says "Welcome, {{variable:SIGNUP_TOKEN}}"', { selector: '#greeting' }),
    ],
  });
  const broken = await app.importTest({
    name: 'Save (broken)',
    step_timeout_seconds: 8,
    steps: [
      step('navigate', 'Open the save page', { url: '/broken' }),
      step('click', 'Click Save', { selector: '#boom' }),
      step('assert-text', 'The page says "Saved"'),
    ],
  });
  const [a, b] = await Promise.all([startRun(h, ok), startRun(h, broken)]);
  try {
    [passed, failed] = await Promise.all([runEnded(h, a.run_id, 150_000), runEnded(h, b.run_id, 150_000)]);
  } catch (err) {
    process.stderr.write(`server log:\n${h.logs.slice(-40).join('\n')}\n`);
    throw err;
  }
  passed.report = a.url;
  failed.report = b.url;
}, 300_000);

describe('a trace per run', () => {
  test('a passing and a failing run each carry a trace_url (media=true) to a masked trace of their steps', async () => {
    expect(passed.status).toBe('passed');
    expect(failed.status).toBe('failed');
    for (const run of [passed, failed]) {
      expect(run.trace_url).toMatch(new RegExp(`^${h.url}/media/runs/.+/trace\\.zip\\?expires=\\d+&sig=`));
      const res = await fetch(run.trace_url);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/zip');
      const entries = await readZip(Buffer.from(await res.arrayBuffer()));
      const trace = entries.find((e) => e.name === 'trace.trace')!.body.toString('utf8');
      run.steps.forEach((s: any, i: number) => {
        if (s.status !== 'skipped') expect(trace).toContain(`"title":"step ${i + 1}: ${s.interaction}`);
      });
    }
    // The secret-named variable typed into the form is masked in the whole trace, as in the outputs.
    expect(passed.steps[3].output).toBe('found "Welcome, [secret]" in #greeting');
    const res = await fetch(passed.trace_url);
    const all = (await readZip(Buffer.from(await res.arrayBuffer())))
      .map((e) => e.body.toString('latin1'))
      .join('\n');
    expect(all).not.toContain(TOKEN);
    expect(all).toContain('[secret]');
    // Without media=true: no trace_url key.
    const bare = await call(h, 'GET', `/run/${passed.id}`, { headers: client(h.org) });
    expect(bare.body).not.toHaveProperty('trace_url');
  });

  test("the planted console error and the app's 500 are on the failing step, and on the report", async () => {
    expect(failed.error).toBe('step 3 (assert-text) failed: text "Saved" not found in the page within 8 s');
    const failing = failed.steps[2];
    expect(failing.status).toBe('failed');
    expect(failing.metadata.console).toEqual(
      expect.arrayContaining([{ level: 'error', text: 'planted console error' }]),
    );
    expect(failing.metadata.network).toEqual([
      { status: '500', text: expect.stringMatching(/^GET http:\/\/127\.0\.0\.1:\d+\/api\/fail → 500$/) },
    ]);
    expect(failed.steps[0].metadata).toBeUndefined();
    const html = await (await fetch(failed.report)).text();
    expect(html).toContain('console error: planted console error');
    expect(html).toMatch(/network 500: GET http:\/\/127\.0\.0\.1:\d+\/api\/fail → 500/);
  });

  test("the report links the run and each step to the service's own trace viewer, which opens the trace in chromium", async () => {
    const browser = await launchChromium();
    try {
      for (const [label, run, last] of [
        ['passed', passed, `step ${signUpSteps.length}: assert-text`],
        ['failed', failed, 'step 3: assert-text'],
      ] as const) {
        const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
        await page.goto(run.report, { waitUntil: 'load' });
        const viewer = await page.locator('#trace').getAttribute('href');
        expect(viewer).toMatch(new RegExp(`^${h.url}/trace-viewer/index\\.html\\?trace=`));
        const stepLinks = await page
          .locator('a.trace')
          .evaluateAll((as) => as.map((a) => a.getAttribute('href')));
        expect(stepLinks.length).toBe(run.steps.filter((s: any) => s.status !== 'skipped').length);
        expect(new Set(stepLinks)).toEqual(new Set([viewer]));
        // The viewer, from this server's origin, loads the trace through its service worker.
        await page.goto(viewer!, { waitUntil: 'load' });
        expect(new URL(page.url()).origin).toBe(new URL(h.url).origin);
        await page.getByText(last).first().waitFor({ timeout: 30_000 });
        for (let i = 1; i <= run.steps.filter((s: any) => s.status !== 'skipped').length; i++)
          expect(await page.getByText(`step ${i}: `).count()).toBeGreaterThan(0);
        await page.getByText(last).first().click();
        await page.waitForTimeout(1_500);
        writeFileSync(join(shots, `trace-viewer-${label}.png`), await page.screenshot());
        await page.close();
      }
    } finally {
      await browser.close();
    }
  }, 120_000);
});
