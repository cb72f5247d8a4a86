import { request } from 'node:http';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { ensureAccessKey } from '../../../functions/core/applications/access.js';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { setLogSink } from '../../../functions/shared/log.js';
import { bearer, call, client } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded } from '../../support/runs-app.js';
import { factoryAppForFile } from '../../support/runs-suite.js';

/*
 * The front door: the service's own calls keep using internal addresses. A run with a scenario against a
 * protected LOCAL preview. Its apps answer on `*.localhost` names (which Node's resolver does not know)
 * behind a front door that wants the access cookie; the run's `up` and `down` go to the factory app's own
 * port, while the browser opens the web app's `*.localhost` origin with the access cookie.
 */

const h = localServerForFile();
const app = factoryAppForFile(h, 'acme/doorfactory');
let env: any;
const logs: string[] = [];
beforeAll(async () => {
  // After the local server's own sink: what the runtime says (a preview asleep, awake) is read here.
  setLogSink((line) => logs.push(line));
  await updateApplication(h.org.orgId, app.applicationId, { access: 'protected', sleepAfterMinutes: 0 });
  await ensureAccessKey(secretStore(), app.applicationId);
  // Redeployed, the main-branch environment is protected: its apps behind doors of their own.
  const res = await call(h, 'POST', `/v1/preview/applications/${app.applicationId}/0`, {
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${app.repo}/0`,
    (s) => s.status === 'ready' && /\.localhost:/.test(String(s.urls?.factory)),
    60_000,
  );
  env = (await call(h, 'GET', `/v1/preview/environments/${app.repo}/0`, { headers: bearer(h.org) })).body;
}, 240_000);

/** GET `path` at a door URL as a browser sends it (to 127.0.0.1 with the URL's own Host), `cookie` given. */
function get(url: string, path: string, cookie?: string): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: u.port,
        path,
        headers: { host: u.host, ...(cookie ? { cookie } : {}) },
        timeout: 30_000,
      },
      (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('a run with a scenario against a protected local preview', () => {
  test('the preview is protected: its factory refuses a caller without the cookie at its public URL', async () => {
    expect(env.urls.factory).toMatch(/^http:\/\/factory--acme-doorfactory-0-[0-9a-f]{4}\.localhost:\d+$/);
    expect(env.urls.web).toMatch(/^http:\/\/web--acme-doorfactory-0-[0-9a-f]{4}\.localhost:\d+$/);
    expect((await get(env.urls.factory, '/_preview/received')).status).toBe(401);
    // Node's own resolver does not know `*.localhost`: what the run's calls would have met.
    await expect(fetch(`${env.urls.factory}/healthz`)).rejects.toThrow();
  });

  test('passes: up and down reached the factory (signed), the browser got its session', async () => {
    const res = await call(h, 'POST', `/test/${await app.importTest({})}/run`, {
      headers: client(h.org),
      body: {},
    });
    expect(res.status).toBe(201);
    const runId = res.body.run_id as string;
    const run = await runEnded(h, runId);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
    expect(run.steps[0].output).toContain('found "Signed in as qa+"');
    expect(run.metadata.scenario).toMatchObject({ status: 'down' });
    // What the factory received, read through its door with the link's cookie.
    const link = new URL(env.accessUrls.factory);
    const cookie = `preview_access=${link.searchParams.get('token')}`;
    const seen = await get(env.urls.factory, '/_preview/received', cookie);
    expect(seen.status).toBe(200);
    const mine = (JSON.parse(seen.body) as any[]).filter((r) => r.body?.testRunId === runId);
    expect(mine.map((r) => [r.body.action, r.verified])).toEqual([
      ['up', true],
      ['down', true],
    ]);
  }, 120_000);

  test('a preview that fell asleep during a quiet run is woken for its down', async () => {
    // A PR preview that sleeps after about 2 s without requests (the main-branch one never sleeps).
    await updateApplication(h.org.orgId, app.applicationId, { sleepAfterMinutes: 0.03 });
    const deployed = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(h.org),
      body: { repoFullName: app.repo, prNumber: 5, headSha: env.lastDeployedSha, headRef: 'pr-5' },
    });
    expect(deployed.status).toBe(202);
    const pr = await pollUntil(
      h,
      h.org,
      `/v1/preview/environments/${app.repo}/5`,
      (s) => s.status === 'ready' || s.status === 'failed',
      60_000,
    );
    expect(pr.status).toBe('ready');
    // Its one step waits (15 s) for what never comes: no request meanwhile, so the preview falls asleep.
    const before = logs.length;
    const testId = await app.importTest({
      steps: [
        {
          interaction: 'wait-for',
          instruction: 'something that never comes',
          element: { html: '', selector: '#never' },
        },
      ],
    });
    const res = await call(h, 'POST', `/test/${testId}/run`, {
      headers: client(h.org),
      body: { application_version_id: (pr as { environmentId?: string }).environmentId },
    });
    expect(res.status).toBe(201);
    const run = await runEnded(h, res.body.run_id);
    expect(run.status).toBe('failed');
    expect(run.steps[0].output).toContain('#never did not appear');
    // It fell asleep during the step and was woken after it, and `down` still reached the factory.
    const during = logs.slice(before).join('\n');
    expect(during).toMatch(/preview asleep[\s\S]*preview awake/);
    expect(run.metadata.scenario).toMatchObject({ status: 'down' });
    expect(run.metadata.scenario_down_error).toBeUndefined();
  }, 150_000);
});
