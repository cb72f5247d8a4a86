import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { DEFAULT_CHROMIUM_PATH, LOCAL_CHROMIUM_FLAGS } from '../../functions/ports/browser/local-chromium.js';
import { pollUntil, SERVER_JS, settled } from '../support/apps.js';
import { makeRepo } from '../support/git.js';
import { bearer, call, type Harness, linkRepo, startHarness } from '../support/harness.js';
import { decodePng } from '../support/png.js';

/*
 * The dashboard at `/`, in a real browser (playwright-core driving Debian's chromium): the caller pastes
 * an API key and sees the organization's environments (status, phase, URLs, failure cause), updating live.
 */

let h: Harness;
let gitRoot: string;
const haveChromium = existsSync(DEFAULT_CHROMIUM_PATH);

beforeAll(async () => {
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-dash-'));
  const sha = makeRepo(gitRoot, 'acme/shop', {
    'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n',
    'server.js': SERVER_JS,
    VERSION: 'v1',
  });
  const broken = makeRepo(gitRoot, 'acme/broken', { 'preview.yaml': 'apps:\n  web:\n    port: "x"\n' });
  h = await startHarness({ gitRoot });
  for (const [repo, headSha, pr] of [
    ['acme/shop', sha, 1],
    ['acme/broken', broken, 2],
  ] as const) {
    await linkRepo(h.org, repo);
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: { repoFullName: repo, prNumber: pr, headSha, headRef: 'f' },
      headers: bearer(h.org),
    });
    expect(res.status).toBe(202);
    await pollUntil(h, h.org, `/v1/preview/environments/${repo}/${pr}`, settled);
  }
}, 60_000);
afterAll(async () => {
  await h.stop();
  rmSync(gitRoot, { recursive: true, force: true });
});

describe('GET /v1/preview/environments (the dashboard source)', () => {
  test("lists the caller's environments only, newest first; 401 without a key", async () => {
    const mine = await call(h, 'GET', '/v1/preview/environments', { headers: bearer(h.org) });
    expect(mine.status).toBe(200);
    expect(mine.body.environments.map((e: { repoFullName: string }) => e.repoFullName).sort()).toEqual([
      'acme/broken',
      'acme/shop',
    ]);
    const other = await h.newOrg('elsewhere');
    expect((await call(h, 'GET', '/v1/preview/environments', { headers: bearer(other) })).body).toEqual({
      environments: [],
    });
    expect((await call(h, 'GET', '/v1/preview/environments')).status).toBe(401);
  });
});

describe('the dashboard path', () => {
  test('only `/` as sent serves it: a target that normalizes to `/` (`/run/%2e%2e`, found by the fuzz tier) stays a JSON 404', async () => {
    // node:http sends the target as written (fetch would normalize it to `/` before sending).
    const { request } = await import('node:http');
    const raw = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${h.url}/run/%2e%2e`, { method: 'GET', path: '/run/%2e%2e' }, (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(raw.status).toBe(404);
    expect(JSON.parse(raw.body)).toEqual({ error: expect.any(String) });
    expect((await fetch(`${h.url}/?x=1`)).headers.get('content-type')).toMatch(/^text\/html/);
  });
});

describe('the dashboard in chromium', () => {
  (haveChromium ? test : test.skip)(
    'a pasted API key shows every environment with its status, URLs and failure cause',
    async () => {
      const page0 = await fetch(`${h.url}/`);
      expect(page0.headers.get('content-type')).toMatch(/^text\/html/);
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({
        executablePath: DEFAULT_CHROMIUM_PATH,
        args: [...LOCAL_CHROMIUM_FLAGS],
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
      });
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
        await page.goto(`${h.url}/`);
        await page.fill('#apiKey', h.org.apiKey);
        await page.click('button[type=submit]');
        await page.waitForSelector('#environments tbody tr:nth-child(2)');
        const rows = await page.$$eval('#environments tbody tr', (trs) =>
          trs.map((tr) => (tr as unknown as { innerText: string }).innerText),
        );
        const shop = rows.find((r) => r.includes('acme/shop'))!;
        const broken = rows.find((r) => r.includes('acme/broken'))!;
        expect(shop).toMatch(/#1\s+ready/);
        expect(shop).toContain('web');
        expect(broken).toMatch(/#2\s+failed/);
        expect(broken).toContain('preview.yaml: apps.web.port');
        expect(await page.$eval('#environments a', (a) => (a as unknown as { href: string }).href)).toMatch(
          /^http:\/\/127\.0\.0\.1:\d+\/$/,
        );
        // The key stays in the tab: a reload shows the same without pasting it again.
        await page.reload();
        await page.waitForSelector('#environments tbody tr:nth-child(2)');
        const shot = await page.screenshot({ fullPage: true });
        writeFileSync(join(process.env.DASHBOARD_SHOTS ?? tmpdir(), 'dashboard.png'), shot);
        expect(decodePng(shot).width).toBe(1280);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
