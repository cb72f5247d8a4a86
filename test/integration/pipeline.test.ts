import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication } from '../../functions/core/tenancy.js';
import { alive, BUILD_JS, hit, pollUntil, SERVER_JS, type Status, settled } from '../support/apps.js';
import { makeRepo } from '../support/git.js';
import { bearer, call, type Harness, startHarness } from '../support/harness.js';

/*
 * The deploy pipeline end to end: real HTTP to the local server, the ASL state machines run in-process,
 * apps built and run as processes by the local runtime from a git repository on disk.
 */

let h: Harness;
let gitRoot: string;
let auth: Record<string, string>;

beforeAll(async () => {
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
  h = await startHarness({ gitRoot });
  auth = bearer(h.org);
});
afterAll(async () => {
  await h.stop();
  rmSync(gitRoot, { recursive: true, force: true });
});

const TWO_APPS = `apps:
  web:
    port: 3000
    build: node build.js web
    command: node server.js web
    health: /healthz
    env: { GREETING: hi, SHOW: "GREETING,API_TOKEN" }
  api:
    port: 4000
    build: node build.js api
    command: node server.js api
`;

describe('a two-app preview, end to end', () => {
  const path = '/v1/preview/environments/acme/shop/1';
  let sha: string;
  let applicationId: string;
  let first: Status;

  beforeAll(async () => {
    sha = makeRepo(gitRoot, 'acme/shop', {
      'preview.yaml': TWO_APPS,
      'server.js': SERVER_JS,
      'build.js': BUILD_JS,
      VERSION: 'v1',
    });
    applicationId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/shop' }))
      .applicationId;
  });

  test('deploy → ready with a URL per app; both answer from the head SHA, with their plain env', async () => {
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: 1, headSha: sha, headRef: 'feature' },
      headers: auth,
    });
    expect(res.status).toBe(202);
    const phases = new Set<string>();
    first = await pollUntil(h, h.org, path, (s) => {
      phases.add(`${s.status}${s.phase ? `/${s.phase}` : ''}`);
      return settled(s);
    });
    expect(first).toMatchObject({ status: 'ready', lastDeployedSha: sha });
    expect(first.phase).toBeUndefined();
    expect(Object.keys(first.urls).sort()).toEqual(['api', 'web']);
    for (const url of Object.values(first.urls)) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Callers see the pipeline move through its phases (sampled by polling, so at least these).
    expect(phases.has('building/building-images') || phases.has('deploying/waiting-ready')).toBe(true);

    const web = await hit(first.urls.web!);
    const api = await hit(first.urls.api!);
    expect(web).toMatchObject({ app: 'web', version: 'v1', env: { GREETING: 'hi', API_TOKEN: null } });
    expect(api).toMatchObject({ app: 'api', version: 'v1' });
    expect(web.stamp).toEqual(expect.any(String));
    // Logs are kept per app under the data dir.
    const log = readFileSync(
      h.service.runtime.logPath({ orgId: h.org.orgId, envKey: 'acme/shop#1' }, 'web'),
      'utf8',
    );
    expect(log).toContain(`build ${sha.slice(0, 12)}`);
  });

  test('restart: a new secret reaches the restarted app; its sibling process is untouched', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    const put = await call(h, 'PUT', `/v1/preview/secrets/${applicationId}/web/API_TOKEN`, {
      body: { value: 'tok-123' },
      headers: auth,
    });
    expect(put.status).toBe(200);

    const res = await call(h, 'PATCH', `${path}/apps/web`, { body: { mode: 'restart' }, headers: auth });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: true,
      repoFullName: 'acme/shop',
      prNumber: 1,
      app: 'web',
      mode: 'restart',
    });
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after.status).toBe('ready');
    expect(after.urls).toEqual(first.urls); // same ports: URLs survive a restart

    const web = await hit(after.urls.web!);
    expect(web.env).toEqual({ GREETING: 'hi', API_TOKEN: 'tok-123' });
    expect(web.pid).not.toBe(before.web.pid);
    expect(web.stamp).toBe(before.web.stamp); // restart reuses the existing build
    expect(await hit(after.urls.api!)).toEqual(before.api); // same process, same build
    // The secret value never reaches the service's own logs.
    expect(h.logs.join('\n')).not.toContain('tok-123');
  });

  test('rebuild: only that app is built and restarted', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    const res = await call(h, 'PATCH', `${path}/apps/api`, { headers: auth });
    expect(res.status).toBe(202);
    expect(res.body.mode).toBe('rebuild');
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after.status).toBe('ready');
    const api = await hit(after.urls.api!);
    expect(api.pid).not.toBe(before.api.pid);
    expect(api.stamp).not.toBe(before.api.stamp);
    expect(await hit(after.urls.web!)).toEqual(before.web);
  });

  test('whole redeploy: every app is rebuilt and restarted at the head SHA', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    expect((await call(h, 'PATCH', path, { headers: auth })).status).toBe(202);
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after).toMatchObject({ status: 'ready', lastDeployedSha: sha });
    const web = await hit(after.urls.web!);
    const api = await hit(after.urls.api!);
    expect(web.pid).not.toBe(before.web.pid);
    expect(api.pid).not.toBe(before.api.pid);
    expect(web.stamp).not.toBe(before.web.stamp);
    expect(api.stamp).not.toBe(before.api.stamp);
    expect(web.env.API_TOKEN).toBe('tok-123');
  });

  test('teardown stops both apps; later redeploys answer 409', async () => {
    const status = await pollUntil(h, h.org, path, settled);
    const pids = ['web', 'api'].map(
      (app) => h.service.runtime.running({ orgId: h.org.orgId, envKey: 'acme/shop#1' }, app)!.pid,
    );
    expect((await call(h, 'DELETE', path, { headers: auth })).status).toBe(202);
    await h.service.workflows.idle();
    const down = await pollUntil(h, h.org, path, (s) => s.status === 'torn_down');
    expect(down.urls).toEqual({});
    for (const url of Object.values(status.urls)) expect(await hit(url)).toBeUndefined();
    for (const pid of pids) expect(alive(pid)).toBe(false);

    const whole = await call(h, 'PATCH', path, { headers: auth });
    expect(whole.status).toBe(409);
    expect(whole.body).toEqual({ error: 'environment was torn down' });
    const app = await call(h, 'PATCH', `${path}/apps/web`, { body: { mode: 'restart' }, headers: auth });
    expect(app.status).toBe(409);
  });
});
