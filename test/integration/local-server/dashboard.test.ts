import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { routes } from '../../../functions/manifest/routes.js';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { compileRoutes, matchRoute } from '../../../lib/local/http-bridge.js';
import { bearer, call, client, linkRepo } from '../../support/api.js';
import { BUILD_JS, hit, pollUntil, SERVER_JS, type Status, settled, twoApps } from '../../support/apps.js';
import { haveChromium as chromiumHere, launchChromium } from '../../support/chromium.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { decodePng } from '../../support/png.js';
import { runEnded, step } from '../../support/runs-app.js';

/*
 * The dashboard at `/`, in a real browser (playwright-core driving Debian's chromium): the caller gives
 * the organization's credentials (here: loads the credentials file `npm start` wrote) and sees each
 * environment with its commit, last update, apps and logs, and acts on it: restart or rebuild one app,
 * redeploy, tear down (after a confirmation), start a test against an environment and open its report.
 * Each action's effect is checked through the API, and every request the page makes is a public route.
 * DASHBOARD_SHOTS=<dir> keeps the screenshots.
 */

const SHOTS = process.env.DASHBOARD_SHOTS ?? mkdtempSync(join(tmpdir(), 'preview-dash-shots-'));
const haveChromium = chromiumHere();
const chromiumTest = haveChromium ? test : test.skip;

// The fixture apps say when they start and when they are built: their logs have something to show.
const TWO_APPS = twoApps({ web: ['health: /healthz'], api: ['health: /healthz'] });
const LOUD_SERVER_JS = `console.log('started ' + (process.argv[2] || 'app') + ' on port ' + process.env.PORT);\n${SERVER_JS}`;
const LOUD_BUILD_JS = `${BUILD_JS}\nconsole.log('built ' + process.argv[2]);\n`;

const h = localServerForFile();
let shopSha: string;
let testId: string;
let browser: Browser | undefined;
let page: Page;
/** Every request the page sent to the service: `METHOD /path`. */
const sent: string[] = [];

const SHOP = '/v1/preview/environments/acme/shop/1';
const BROKEN = '/v1/preview/environments/acme/broken/2';
const status = async (path: string) => (await call(h, 'GET', path, { headers: bearer(h.org) })).body;
/** What an app of the shop answers: which process (pid in its namespace) and which build (stamp). */
async function boot(app: string): Promise<{ process: string; stamp: string }> {
  const env = await status(SHOP);
  const answer = await hit(env.urls[app]);
  return { process: `${answer.pid}/${answer.pidns}`, stamp: answer.stamp };
}

beforeAll(async () => {
  shopSha = makeRepo(h.gitRoot, 'acme/shop', {
    'preview.yaml': TWO_APPS,
    'server.js': LOUD_SERVER_JS,
    'build.js': LOUD_BUILD_JS,
    VERSION: 'v1',
  });
  const broken = makeRepo(h.gitRoot, 'acme/broken', { 'preview.yaml': 'apps:\n  web:\n    port: "x"\n' });
  let shopApp = '';
  for (const [repo, headSha, pr] of [
    ['acme/shop', shopSha, 1],
    ['acme/broken', broken, 2],
  ] as const) {
    const applicationId = await linkRepo(h.org, repo);
    if (repo === 'acme/shop') shopApp = applicationId;
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: { repoFullName: repo, prNumber: pr, headSha, headRef: 'f' },
      headers: bearer(h.org),
    });
    expect(res.status).toBe(202);
    await pollUntil(h, h.org, `/v1/preview/environments/${repo}/${pr}`, settled, 60_000);
  }
  testId = (
    await importTests(h.org.orgId, [
      {
        name: 'Web answers',
        folder: { id: 'smoke', name: 'Smoke' },
        application_id: shopApp,
        application_version: { name: 'web', path: '/' },
        steps: [
          step('navigate', 'Open the web app', { url: '/' }),
          step('assert-text', 'The page says "web"'),
        ],
      },
    ])
  ).tests[0]!.id;
  mkdirSync(SHOTS, { recursive: true });
  if (!haveChromium) return;
  browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1400, height: 800 } });
  page = await context.newPage();
  page.on('request', (req) => {
    const url = new URL(req.url());
    if (url.origin === h.url) sent.push(`${req.method()} ${url.pathname}`);
  });
}, 120_000);
afterAll(async () => {
  await browser?.close();
}, 60_000);

const shot = async (name: string) => {
  const png = await page.screenshot({ fullPage: true });
  writeFileSync(join(SHOTS, name), png);
  expect(decodePng(png).width).toBe(1400);
};
const rowOf = (env: string) => page.locator(`#environments tbody tr[data-env="${env}"]`);
/** Wait until the text of `selector` matches `re` (what the page says after a click). */
async function says(selector: string, re: RegExp, ms = 20_000): Promise<string> {
  const deadline = Date.now() + ms;
  let text = '';
  do {
    text = (await page.textContent(selector)) ?? '';
    if (re.test(text)) return text;
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  throw new Error(`${selector} never matched ${re}; it says ${JSON.stringify(text)}`);
}
/** Poll the API until `done` holds (the effect of a click). */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T;
  do {
    last = await read();
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < deadline);
  throw new Error(`timed out; last ${JSON.stringify(last)}`);
}

describe('GET /v1/preview/environments (the dashboard source)', () => {
  test("lists the caller's environments only, each with its apps; 401 without a key", async () => {
    const mine = await call(h, 'GET', '/v1/preview/environments', { headers: bearer(h.org) });
    expect(mine.status).toBe(200);
    const byRepo = Object.fromEntries(
      mine.body.environments.map((e: { repoFullName: string }) => [e.repoFullName, e]),
    );
    expect(Object.keys(byRepo).sort()).toEqual(['acme/broken', 'acme/shop']);
    expect(byRepo['acme/shop']).toMatchObject({
      status: 'ready',
      lastDeployedSha: shopSha,
      apps: ['api', 'web'],
    });
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

  test('says where the local credentials are, and holds none of them', async () => {
    const html = await (await fetch(`${h.url}/`)).text();
    expect(html).toContain(join(h.dataDir, 'credentials.json'));
    expect(html).toContain(join(h.dataDir, 'orgs'));
    for (const secret of [h.org.apiKey, h.org.clientSecret, h.org.clientId])
      expect(html).not.toContain(secret);
  });
});

describe('the dashboard in chromium', () => {
  chromiumTest('a wrong key shows the 401 that names the credential the routes take', async () => {
    await page.goto(`${h.url}/`);
    await page.fill('#apiKey', `pvk_abcdefgh_${'A'.repeat(43)}`);
    await page.click('#credentials button[type=submit]');
    await says('#status', /missing or invalid credentials/);
    expect(await page.textContent('#status')).toBe(
      'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    );
  });

  chromiumTest(
    'the credentials file loads in the tab; each environment shows its commit, last update, apps and cause',
    async () => {
      // The failed one as a failure that stopped its apps leaves it (environments/failed.test.ts makes one).
      const stoppedApps = { web: 'exited (exit code 1): Error: Cannot find module ./db' };
      await ddb().send(
        new UpdateCommand({
          TableName: table('environments'),
          Key: { orgId: h.org.orgId, envKey: keys.environments.envKey('acme/broken', 2) },
          UpdateExpression: 'SET stoppedApps = :s',
          ExpressionAttributeValues: { ':s': stoppedApps },
        }),
      );
      await page.goto(`${h.url}/`);
      await page.setInputFiles('#credentialsFile', join(h.dataDir, 'credentials.json'));
      await page.waitForSelector('#environments tbody tr[data-env="acme/shop #1"]');
      await page.waitForSelector('#test option[value]:not([value=""])', { state: 'attached' });
      const shop = await status(SHOP);
      const row = rowOf('acme/shop #1');
      const text = await row.innerText();
      expect(text).toContain('ready');
      expect(text).toContain(shopSha.slice(0, 7));
      expect(await row.locator('code').getAttribute('title')).toBe(shopSha);
      expect(await row.locator('time').getAttribute('datetime')).toBe(shop.updatedAt);
      for (const app of ['web', 'api']) {
        expect(await row.locator(`a.name:text-is("${app}")`).getAttribute('href')).toBe(shop.urls[app]);
        await expect(
          row.getByRole('button', { name: `restart ${app} of acme/shop #1` }).count(),
        ).resolves.toBe(1);
        await expect(row.getByRole('link', { name: `logs of ${app} in acme/shop #1` }).count()).resolves.toBe(
          1,
        );
      }
      const broken = await rowOf('acme/broken #2').innerText();
      expect(broken).toContain('failed');
      expect(broken).toContain('preview.yaml: apps.web.port');
      // Each stopped app of a failed environment says why, on its line.
      expect(
        await rowOf('acme/broken #2').locator('.app:has(.name:text-is("web")) .stopped').innerText(),
      ).toBe(stoppedApps.web);
      await ddb().send(
        new UpdateCommand({
          TableName: table('environments'),
          Key: { orgId: h.org.orgId, envKey: keys.environments.envKey('acme/broken', 2) },
          UpdateExpression: 'REMOVE stoppedApps',
        }),
      );
      // The key stays in the tab: a reload shows the same without giving it again.
      await page.reload();
      await page.waitForSelector('#environments tbody tr[data-env="acme/shop #1"]');
      await shot('dashboard.png');
    },
    60_000,
  );

  chromiumTest(
    "an app's logs link opens its recent output, and its build's, through the logs API",
    async () => {
      await rowOf('acme/shop #1').getByRole('link', { name: 'logs of web in acme/shop #1' }).click();
      await page.waitForSelector('#logs[open]');
      await says('#logsText', /started web/);
      const api = await call(h, 'GET', `${SHOP}/apps/web/logs?tail=200`, { headers: bearer(h.org) });
      expect(await page.textContent('#logsText')).toBe(api.text);
      expect(await page.textContent('#logs-title')).toBe('Output of web in acme/shop #1');
      await shot('logs.png');
      await page.click('#logsBuild');
      await says('#logsText', /built web/);
      await page.click('#logsClose');
      await page.waitForSelector('#logs:not([open])', { state: 'attached' });
      expect(new URL(page.url()).hash).toBe('');
    },
    30_000,
  );

  chromiumTest(
    'Restart re-runs one app from its build, Rebuild builds and runs one app; the sibling keeps running',
    async () => {
      const web0 = await boot('web');
      const api0 = await boot('api');
      await rowOf('acme/shop #1').getByRole('button', { name: 'restart web of acme/shop #1' }).click();
      await says('#status', /Restart of web in acme\/shop #1: accepted/);
      const web1 = await until(
        () => boot('web').catch(() => web0),
        (b) => b.process !== web0.process,
      );
      expect(web1.stamp).toBe(web0.stamp);
      await until(
        () => status(SHOP),
        (s: Status) => s.status === 'ready',
      );
      expect(await boot('api')).toEqual(api0);

      await rowOf('acme/shop #1').getByRole('button', { name: 'rebuild api of acme/shop #1' }).click();
      await says('#status', /Rebuild of api in acme\/shop #1: accepted/);
      const api1 = await until(
        () => boot('api').catch(() => api0),
        (b) => b.stamp !== api0.stamp,
      );
      expect(api1.process).not.toBe(api0.process);
      await until(
        () => status(SHOP),
        (s: Status) => s.status === 'ready',
      );
      expect(await boot('web')).toEqual(web1);
    },
    120_000,
  );

  chromiumTest(
    'Redeploy runs the whole pipeline again at the same commit',
    async () => {
      const before = await status(SHOP);
      const web0 = await boot('web');
      await rowOf('acme/shop #1').getByRole('button', { name: 'redeploy acme/shop #1' }).click();
      await says('#status', /Redeploy of acme\/shop #1: accepted/);
      const after = await until(
        () => status(SHOP),
        (s) => s.status === 'ready' && s.updatedAt !== before.updatedAt,
      );
      expect(after.lastDeployedSha).toBe(shopSha);
      expect((await boot('web')).process).not.toBe(web0.process);
      // The page follows: the row shows the new last update.
      await until(
        () => rowOf('acme/shop #1').locator('time').getAttribute('datetime'),
        (at) => at === after.updatedAt,
        10_000,
      );
    },
    120_000,
  );

  chromiumTest(
    'a test starts against the chosen environment; its run links to a report that names repo, PR and commit',
    async () => {
      const shop = await status(SHOP);
      await page.selectOption('#test', testId);
      await page.selectOption('#target', shop.environmentId);
      await page.click('#start button[type=submit]');
      await says('#status', /Started run \S+ of Web answers/);
      const runId = /Started run (\S+) /.exec((await page.textContent('#status'))!)![1]!;
      const run = await runEnded(h, runId);
      expect(run).toMatchObject({
        status: 'passed',
        test_id: testId,
        metadata: { source: 'dashboard', application_version_id: shop.environmentId },
        environment: { repository: 'acme/shop', pr_number: 1, commit: shopSha },
      });
      const link = page.getByRole('link', { name: `report of Web answers, run ${runId}` });
      await link.waitFor();
      const runsText = await says('#runs tbody', /passed/);
      expect(runsText).toContain('acme/shop #1');
      await shot('runs.png');
      const [report] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
      await report.waitForLoadState();
      const header = await report.locator('.card').first().innerText();
      expect(header).toContain('acme/shop');
      expect(header).toContain('PR #1');
      expect(header).toContain(shopSha.slice(0, 7));
      const png = await report.screenshot({ fullPage: true });
      writeFileSync(join(SHOTS, 'report.png'), png);
      await report.close();
    },
    120_000,
  );

  chromiumTest(
    'Tear down asks first: Cancel changes nothing, confirming tears the environment down',
    async () => {
      const tearDown = rowOf('acme/broken #2').getByRole('button', { name: 'tear down acme/broken #2' });
      await tearDown.click();
      await page.waitForSelector('#confirm[open]');
      expect(await page.textContent('#confirmText')).toContain('Tear down acme/broken #2?');
      await shot('confirm.png');
      await page.getByRole('button', { name: 'Cancel' }).click();
      await page.waitForSelector('#confirm:not([open])', { state: 'attached' });
      await new Promise((r) => setTimeout(r, 500));
      expect((await status(BROKEN)).status).toBe('failed');

      await tearDown.click();
      await page.waitForSelector('#confirm[open]');
      await page.click('#confirmOk');
      await until(
        () => status(BROKEN),
        (s: Status) => s.status === 'torn_down',
      );
      await says('tr[data-env="acme/broken #2"]', /torn_down/);
      // A torn-down environment offers no actions.
      expect(await rowOf('acme/broken #2').getByRole('button').count()).toBe(0);
      await shot('after-teardown.png');
    },
    60_000,
  );

  chromiumTest('every request the page made is a public API route (or the page itself)', () => {
    const compiled = compileRoutes(routes);
    expect(sent.length).toBeGreaterThan(10);
    for (const line of new Set(sent)) {
      const [method, path] = line.split(' ') as [string, string];
      if (method === 'GET' && path === '/') continue;
      expect({ line, route: matchRoute(compiled, method, path) !== undefined }).toEqual({
        line,
        route: true,
      });
    }
    const kinds = new Set(sent.map((l) => l.split(' ')[0]));
    expect([...kinds].sort()).toEqual(['DELETE', 'GET', 'PATCH', 'POST']);
  });
});

// The client credentials are what the runs table and the start form use.
test('client credentials read the tests the start form offers', async () => {
  const res = await call(h, 'GET', '/test', { headers: client(h.org) });
  expect(res.body.map((t: { id: string }) => t.id)).toContain(testId);
});
