import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { accessKey, ensureAccessKey } from '../../../functions/core/applications/access.js';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { bearer, call } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { haveChromium, launchChromium } from '../../support/chromium.js';
import { localServerForFile } from '../../support/local-server.js';
import { decodePng } from '../../support/png.js';
import { runsAppForFile } from '../../support/runs-suite.js';

/*
 * The front door on the local dashboard, in real chromium: a protected preview's apps each show their signed
 * access link (read from the environment's status, never the access key); opening it in the browser sets
 * the cookie and shows the app. A public preview's apps show none. DASHBOARD_SHOTS=<dir> keeps the shots.
 */

const SHOTS = process.env.DASHBOARD_SHOTS ?? mkdtempSync(join(tmpdir(), 'preview-dash-shots-'));
const chromiumTest = haveChromium() ? test : test.skip;

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/dash' });
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
let env: any;
const sent: string[] = [];

beforeAll(async () => {
  await updateApplication(h.org.orgId, app.applicationId, { access: 'protected', sleepAfterMinutes: 0 });
  await ensureAccessKey(secretStore(), app.applicationId);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    headers: bearer(h.org),
    body: { repoFullName: app.repo, prNumber: 3, headSha: app.main.lastDeployedSha, headRef: 'pr-3' },
  });
  expect(res.status).toBe(202);
  const ready = await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${app.repo}/3`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  expect(ready.status).toBe('ready');
  env = (await call(h, 'GET', `/v1/preview/environments/${app.repo}/3`, { headers: bearer(h.org) })).body;
  mkdirSync(SHOTS, { recursive: true });
  if (!haveChromium()) return;
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1400, height: 800 } });
  page = await context.newPage();
  page.on('request', (req) => {
    const url = new URL(req.url());
    if (url.origin === h.url) sent.push(`${req.method()} ${url.pathname}`);
  });
}, 180_000);
afterAll(async () => {
  await browser?.close();
}, 60_000);

describe('the dashboard and a protected preview', () => {
  chromiumTest(
    'each app of the protected preview shows its signed link, which opens the app; never the key',
    async () => {
      expect(env.urls.web).toMatch(/\.localhost:\d+$/);
      await page.goto(`${h.url}/`);
      await page.setInputFiles('#credentialsFile', join(h.dataDir, 'credentials.json'));
      const row = page.locator(`#environments tbody tr[data-env="${app.repo} #3"]`);
      const link = row.getByRole('link', { name: `access link of web in ${app.repo} #3` });
      await link.waitFor({ timeout: 20_000 });
      const href = await link.getAttribute('href');
      expect(href).toMatch(
        new RegExp(`^${env.urls.web.replace(/\./g, '\\.')}/__preview/access\\?token=v1\\.`),
      );
      expect(await row.getByRole('link', { name: `access link of api in ${app.repo} #3` }).count()).toBe(1);
      // The app's own URL without the cookie: the door's 401 page, so the link is what gets a person in.
      expect(await row.locator('a.name:text-is("web")').getAttribute('href')).toBe(env.urls.web);
      // The public main-branch environment (deployed before the application was protected): no link.
      const main = page.locator(`#environments tbody tr[data-env="${app.repo} main"]`);
      await expect(main.locator('a.access').count()).resolves.toBe(0);
      // The page never holds the access key.
      const key = await accessKey(secretStore(), app.applicationId);
      expect(await page.content()).not.toContain(key!);
      // Every request the page made is the public API (the list, and the status with the links).
      expect(sent).toContain(`GET /v1/preview/environments/${app.repo}/3`);
      const png = await page.screenshot({ fullPage: true });
      writeFileSync(join(SHOTS, 'dashboard-access.png'), png);
      expect(decodePng(png).width).toBe(1400);
      // Opening it (a new tab): the door sets the cookie and sends the browser to the app's `/`.
      const [tab] = await Promise.all([context.waitForEvent('page'), link.click()]);
      await tab.waitForLoadState('load');
      expect(tab.url()).toBe(`${env.urls.web}/`);
      expect(await tab.textContent('h1')).toBe('Sign up');
      const cookies = await context.cookies(env.urls.web);
      expect(cookies.map((c) => [c.name, c.httpOnly, c.domain])).toEqual([
        ['preview_access', true, new URL(env.urls.web).hostname],
      ]);
      writeFileSync(join(SHOTS, 'dashboard-access-opened.png'), await tab.screenshot());
      await tab.close();
    },
    90_000,
  );
});
