import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  accessKey,
  ensureAccessKey,
  prepareRunAccess,
  rotateAccessKey,
} from '../../../functions/core/applications/access.js';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { LocalChromium } from '../../../functions/ports/browser/local-chromium.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { bearer, call } from '../../support/api.js';
import { alive, pollUntil } from '../../support/apps.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl, previewctlRaw } from '../../support/process.js';
import { runEnded } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';
import { commentSaying } from '../../support/webhooks.js';

/*
 * The local runtime's front door. A protected preview refuses a visitor without the
 * cookie and lets the link's cookie in; a run passes with nothing configured; the cookie never reaches
 * another origin; rotating the key refuses the old cookie; a preview sleeps after its (shortened) idle
 * time, its processes gone, and the next request wakes it; a run against a sleeping preview wakes it.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/shop' });
beforeAll(async () => {
  // Protected (locally the default is public), never asleep for the first environment.
  await updateApplication(h.org.orgId, app.applicationId, { access: 'protected', sleepAfterMinutes: 0 });
  await ensureAccessKey(secretStore(), app.applicationId);
}, 120_000);

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** GET `path` of a door URL as a browser would send it: to 127.0.0.1, with the URL's own Host header. */
function get(url: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: u.port, path, headers: { host: u.host, ...headers }, timeout: 30_000 },
      (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function deployPr(pr: number) {
  const res = await call(h, 'POST', '/v1/preview/environments', {
    headers: bearer(h.org),
    body: { repoFullName: app.repo, prNumber: pr, headSha: app.main.lastDeployedSha, headRef: `pr-${pr}` },
  });
  expect(res.status).toBe(202);
  const status = await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${app.repo}/${pr}`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  expect(status.status).toBe('ready');
  return (await call(h, 'GET', `/v1/preview/environments/${app.repo}/${pr}`, { headers: bearer(h.org) }))
    .body;
}

const cookieOf = (a: Answer) => String(a.headers['set-cookie']?.[0] ?? '').split(';')[0]!;

describe('a protected preview', () => {
  let env: any;
  let cookie: string;

  test('serves each app on a host name of its own, with a signed link in its status', async () => {
    env = await deployPr(7);
    expect(env.urls.web).toMatch(/^http:\/\/web--acme-shop-7-[0-9a-f]{4}\.localhost:\d+$/);
    expect(env.urls.api).toMatch(/^http:\/\/api--acme-shop-7-[0-9a-f]{4}\.localhost:\d+$/);
    expect(env.accessUrls.web).toMatch(new RegExp(`^${env.urls.web}/__preview/access\\?token=v1\\.`));
    // The main-branch environment of the same application: protected too, once redeployed; not yet.
    const apps = await call(h, 'GET', '/v1/preview/applications', { headers: bearer(h.org) });
    expect(apps.body.applications[0]).toMatchObject({ access: 'protected', sleepAfterMinutes: 0 });
  }, 90_000);

  test("the PR comment carries each app's signed link, never the access key", async () => {
    const body = await commentSaying(h.dataDir, app.repo, 7, 'Access link');
    const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect(body).toMatch(
      new RegExp(
        `\\| web \\| ${esc(env.urls.web)} \\| \\[open web\\]\\(${esc(env.urls.web)}/__preview/access\\?token=v1\\.`,
      ),
    );
    expect(body).toContain(`previewctl envs open --repo ${app.repo} --pr 7`);
    const key = await accessKey(secretStore(), app.applicationId);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(body).not.toContain(key!);
    // The comment's link lets a visitor in like the status's.
    const link = new URL(/\[open web\]\(([^)]+)\)/.exec(body!)![1]!);
    const opened = await get(env.urls.web, `${link.pathname}${link.search}`);
    expect(opened.status).toBe(302);
  }, 30_000);

  test('refuses a visitor without the cookie with a page saying how to get in, never the app', async () => {
    const res = await get(env.urls.web, '/', { accept: 'text/html' });
    expect(res.status).toBe(401);
    expect(res.body).toContain(`previewctl envs open --repo ${app.repo} --pr 7`);
    expect(res.body).not.toContain('Sign up');
    // Another host name (127.0.0.1) is sent to the app's own first: its cookie is only ever sent there.
    const bare = await get(env.urls.web.replace(/\/\/[^:]+:/, '//127.0.0.1:'), '/x?y=1');
    expect(bare.status).toBe(308);
    expect(bare.headers.location).toBe(`${env.urls.web}/x?y=1`);
    // A forged token is refused, and a link of another environment opens nothing here.
    const forged = await get(env.urls.web, '/__preview/access?token=v1.9999999999.AAAA');
    expect(forged.status).toBe(401);
  }, 30_000);

  test('the link sets a host-only HttpOnly cookie that lets the visitor in; the app never sees it', async () => {
    const link = new URL(env.accessUrls.web);
    const opened = await get(env.urls.web, `${link.pathname}${link.search}`);
    expect(opened.status).toBe(302);
    expect(opened.headers.location).toBe('/');
    const set = String(opened.headers['set-cookie']?.[0]);
    expect(set).toMatch(
      /^preview_access=v1\.\d+\.[A-Za-z0-9_-]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/,
    );
    expect(set).not.toMatch(/domain=/i);
    cookie = cookieOf(opened);
    const page = await get(env.urls.web, '/', { cookie: `${cookie}; theirs=1` });
    expect(page.status).toBe(200);
    expect(page.body).toContain('Sign up');
    // The same token does not open the other app's host without its own link being opened there first.
    const api = await get(env.urls.api, '/healthz');
    expect(api.status).toBe(401);
    expect((await get(env.urls.api, '/healthz', { cookie })).status).toBe(200);
  }, 30_000);

  test('a run passes against it with nothing configured', async () => {
    const testId = await app.importTest({});
    const started = await startRun(h, testId, { application_version_id: env.environmentId });
    const run = await runEnded(h, started.run_id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
  }, 120_000);

  test("the run's cookie never reaches another origin (a second app records what it receives)", async () => {
    const seen: { host?: string; cookie?: string }[] = [];
    const recorder: Server = createServer((req, res) => {
      seen.push({ host: req.headers.host, cookie: req.headers.cookie });
      res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>recorder</h1>');
    });
    await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r));
    const port = (recorder.address() as { port: number }).port;
    const others = [`http://127.0.0.1:${port}`, `http://other--acme-shop-7.localhost:${port}`];
    const browser = new LocalChromium();
    try {
      // What the run executor does (core/access.ts prepareRunAccess → the session's addCookies).
      const cookies = await prepareRunAccess({ secrets: secretStore() }, h.org.orgId, {
        applicationId: app.applicationId,
        envKey: `${app.repo}#7`,
        access: 'protected',
        urls: env.urls,
      });
      expect(cookies.map((c) => c.url).sort()).toEqual(Object.values(env.urls).sort());
      const session = await browser.open({
        viewport: { width: 800, height: 600 },
        video: false,
        allowedOrigins: [env.urls.web, ...others],
      });
      for (const { url, cookie: c } of cookies) await session.addCookies!([c], url);
      await session.goto(env.urls.web, 15_000);
      expect(await session.waitForText('Sign up', undefined, 5_000)).toBe(true);
      for (const other of others) await session.goto(other, 15_000);
      await session.close();
    } finally {
      await browser.stop();
      recorder.close();
    }
    // Both origins were loaded (a favicon request may come too), and none got the cookie.
    expect(new Set(seen.map((s) => s.host))).toEqual(new Set(others.map((o) => new URL(o).host)));
    for (const s of seen) expect(s.cookie ?? '').not.toContain('preview_access');
  }, 60_000);

  test('rotating the access key refuses the old cookie; the new link lets in again', async () => {
    await rotateAccessKey(secretStore(), app.applicationId);
    await new Promise((r) => setTimeout(r, 1_100)); // the door trusts a key read for a second
    const old = await get(env.urls.web, '/', { cookie });
    expect(old.status).toBe(401);
    expect(old.body).toContain('no longer valid');
    const fresh = (await call(h, 'GET', `/v1/preview/environments/${app.repo}/7`, { headers: bearer(h.org) }))
      .body;
    expect(fresh.accessUrls.web).not.toBe(env.accessUrls.web);
    const link = new URL(fresh.accessUrls.web);
    const opened = await get(env.urls.web, `${link.pathname}${link.search}`);
    expect((await get(env.urls.web, '/', { cookie: cookieOf(opened) })).status).toBe(200);
  }, 30_000);
});

describe('previewctl', () => {
  test('apps update --access and --sleep-after-minutes; envs open prints the links; rotate-access-key shows no key', async () => {
    const dataDir = h.dataDir;
    const set = await previewctl(
      dataDir,
      'apps',
      'update',
      '--app',
      app.applicationId,
      '--access',
      'protected',
    );
    expect(set.code).toBe(0);
    expect(set.out).toMatchObject({
      applicationId: app.applicationId,
      access: 'protected',
      sleepAfterMinutes: 0,
    });
    const bad = await previewctl(
      dataDir,
      'apps',
      'update',
      '--app',
      app.applicationId,
      '--access',
      'private',
    );
    expect(bad).toEqual({ code: 2, out: { error: '--access must be one of protected, public' } });
    const never = await previewctl(
      dataDir,
      'apps',
      'update',
      '--app',
      app.applicationId,
      '--sleep-after-minutes',
      'soon',
    );
    expect(never.code).toBe(2);
    expect(never.out.error).toMatch(/^--sleep-after-minutes must be a number of minutes from 0/);

    const open = await previewctlRaw(
      dataDir,
      { PREVIEW_DATA_DIR: dataDir },
      'envs',
      'open',
      '--repo',
      app.repo,
      '--pr',
      '7',
    );
    expect(open.code).toBe(0);
    const lines = open.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(
      /^web {2}http:\/\/web--acme-shop-7-[0-9a-f]{4}\.localhost:\d+\/__preview\/access\?token=v1\./,
    );

    const rotated = await previewctl(dataDir, 'apps', 'rotate-access-key', '--app', app.applicationId);
    expect(rotated).toEqual({ code: 0, out: { applicationId: app.applicationId, rotated: true } });
    const link = new URL(lines[1]!.split(/\s+/)[1]!);
    await new Promise((r) => setTimeout(r, 1_100));
    const env = (await call(h, 'GET', `/v1/preview/environments/${app.repo}/7`, { headers: bearer(h.org) }))
      .body;
    expect((await get(env.urls.web, `${link.pathname}${link.search}`)).status).toBe(401);
  }, 60_000);
});

describe('sleep and wake', () => {
  let env: any;
  const target = () => ({ orgId: h.org.orgId, envKey: `${app.repo}#8` });
  const statusPath = `/v1/preview/environments/acme/shop/8`;
  const asleep = (s: any) => s.phase === 'asleep';

  test('a preview idle for its (shortened) time sleeps: phase asleep, its processes gone', async () => {
    // Public this time, asleep after 1.5 s without a request.
    await updateApplication(h.org.orgId, app.applicationId, { access: 'public', sleepAfterMinutes: 0.025 });
    env = await deployPr(8);
    expect(env.urls.web).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(env.accessUrls).toBeUndefined();
    const pids = ['web', 'api'].map((app) => h.service.runtime.running(target(), app)!.pid);
    const status = await pollUntil(h, h.org, statusPath, asleep, 15_000);
    expect(status.status).toBe('ready');
    expect(Date.parse((status as any).asleepAt)).toBeGreaterThan(Date.parse(env.updatedAt));
    expect(h.service.runtime.running(target(), 'web')).toBeUndefined();
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 90_000);

  test("the next request wakes it and gets the app's answer (a page load sees the waiting page first)", async () => {
    const started = Date.now();
    const res = await fetch(`${env.urls.web}/`, { signal: AbortSignal.timeout(30_000) });
    const wakeMs = Date.now() - started;
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Sign up');
    process.stdout.write(`front door: first request to a sleeping preview answered in ${wakeMs} ms\n`);
    expect(h.service.runtime.running(target(), 'web')).toBeDefined();
    const status = (await call(h, 'GET', statusPath, { headers: bearer(h.org) })).body;
    expect(status.phase).toBeUndefined();
    expect(status.asleepAt).toBeUndefined();
    // Asleep again, a browser's page load that takes over a second sees the waiting page, which reloads.
    await pollUntil(h, h.org, statusPath, asleep, 15_000);
    const api = (await call(h, 'GET', statusPath, { headers: bearer(h.org) })).body.urls.api;
    const page = await fetch(`${api}/`, {
      headers: { accept: 'text/html' },
      signal: AbortSignal.timeout(30_000),
    });
    const body = await page.text();
    if (page.status === 503) {
      expect(body).toContain('http-equiv="refresh"');
      expect(page.headers.get('retry-after')).toBe('1');
    } else expect(body).toContain('Sign up'); // it woke within the second
  }, 90_000);

  test('a run against a sleeping preview wakes it first and passes', async () => {
    await pollUntil(h, h.org, statusPath, asleep, 15_000);
    const testId = await app.importTest({ name: 'Sign up on a sleeping preview' });
    const started = await startRun(h, testId, { application_version_id: env.environmentId });
    const run = await runEnded(h, started.run_id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
  }, 120_000);
});
