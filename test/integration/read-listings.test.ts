import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import { bearer, call, client, type Harness, linkRepo, startHarness } from '../support/harness.js';

/* The read endpoints users look for (issue 26, item 10): applications, tests, recipe versions. */

let h: Harness;
let other: OrgCredentials;
beforeAll(async () => {
  h = await startHarness();
  other = await h.newOrg();
}, 60_000);
afterAll(async () => {
  await h.stop();
});

const testDef = (name: string, folder: string) => ({
  name,
  folder: { id: folder, name: folder.toUpperCase() },
  application_version: { name: 'v1', path: '/' },
  steps: [{ instruction: 'Open it', interaction: 'navigate', url: '/' }],
});

describe('GET /v1/preview/applications', () => {
  test("the org's applications, oldest first; ?repo= the one linking it; never another org's", async () => {
    const web = await linkRepo(h.org, 'acme/web');
    const api = await linkRepo(h.org, 'acme/api');
    await linkRepo(other, 'acme/web');
    const all = await call(h, 'GET', '/v1/preview/applications', { headers: bearer(h.org) });
    expect(all.status).toBe(200);
    expect(all.body.applications.map((a: { applicationId: string }) => a.applicationId)).toEqual([web, api]);
    expect(all.body.applications[0]).toEqual({
      applicationId: web,
      name: 'acme/web',
      repoFullName: 'acme/web',
      disabled: false,
      installationActive: true,
      ttlHours: 72,
      deployDrafts: false,
      allowedOrigins: [],
      createdAt: expect.any(String),
      // Which pull requests get a preview (issue 27), with the defaults filled in.
      skipLabel: 'no-preview',
      requireLabel: null,
      paths: [],
      skipAuthors: [],
      // The front door (issue 29), with the local defaults: public on the loopback, asleep after 30 minutes.
      access: 'public',
      sleepAfterMinutes: 30,
    });
    const one = await call(h, 'GET', '/v1/preview/applications?repo=ACME/API', { headers: bearer(h.org) });
    expect(one.body.applications.map((a: { applicationId: string }) => a.applicationId)).toEqual([api]);
    const none = await call(h, 'GET', '/v1/preview/applications?repo=acme/none', { headers: bearer(h.org) });
    expect(none.body).toEqual({ applications: [] });
    const theirs = await call(h, 'GET', '/v1/preview/applications', { headers: bearer(other) });
    expect(theirs.body.applications).toHaveLength(1);
    expect(theirs.body.applications[0].applicationId).not.toBe(web);
    const bad = await call(h, 'GET', '/v1/preview/applications?repo=nope', { headers: bearer(h.org) });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/repo/);
    expect((await call(h, 'GET', '/v1/preview/applications')).status).toBe(401);
  });
});

describe('GET /test', () => {
  test("the org's tests, newest first, without steps; ?folder= one folder's; never another org's", async () => {
    const first = await importTests(h.org.orgId, [testDef('first', 'smoke')]);
    const second = await importTests(h.org.orgId, [testDef('second', 'deep')]);
    await importTests(other.orgId, [testDef('theirs', 'smoke')]);
    const all = await call(h, 'GET', '/test', { headers: client(h.org) });
    expect(all.status).toBe(200);
    expect(all.body.map((t: { name: string }) => t.name)).toEqual(['second', 'first']);
    expect(all.body[0]).toEqual({
      id: second.tests[0]!.id,
      name: 'second',
      created_at: expect.any(String),
      folder: { id: 'deep', name: 'DEEP' },
      application_version: { name: 'v1', path: '/' },
    });
    const smoke = await call(h, 'GET', '/test?folder=smoke', { headers: client(h.org) });
    expect(smoke.body.map((t: { id: string }) => t.id)).toEqual([first.tests[0]!.id]);
    expect((await call(h, 'GET', '/test?folder=a%20b', { headers: client(h.org) })).status).toBe(400);
    // The API key is not the credential of the test routes.
    expect((await call(h, 'GET', '/test', { headers: bearer(h.org) })).status).toBe(401);
  });
});

describe('GET /v1/setup/setups/{setupId}/scenario-recipe-versions[/{version}]', () => {
  const file = (name: string) => ({
    version: 1,
    source: { discoverPath: 'd.json', scenariosPath: 's.md', extra: 'kept' },
    validationMode: 'sdk-check',
    recipes: [
      {
        name,
        description: 'd',
        create: { users: [{ email: 'a@example.com' }] },
        validation: { status: 'validated', method: 'checkScenario', phase: 'ok' },
      },
    ],
  });
  const path = (setup: string) => `/v1/setup/setups/${setup}/scenario-recipe-versions`;

  test('versions newest first, one with its file as uploaded; 404 for another org, 400 for a bad version', async () => {
    for (const name of ['one', 'two'])
      expect((await call(h, 'POST', path('shop'), { body: file(name), headers: bearer(h.org) })).status).toBe(
        201,
      );
    const list = await call(h, 'GET', path('shop'), { headers: bearer(h.org) });
    expect(list.status).toBe(200);
    expect(list.body.versions).toEqual([
      { setupId: 'shop', version: 2, recipeCount: 1, createdAt: expect.any(String) },
      { setupId: 'shop', version: 1, recipeCount: 1, createdAt: expect.any(String) },
    ]);
    const one = await call(h, 'GET', `${path('shop')}/1`, { headers: bearer(h.org) });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ setupId: 'shop', version: 1, file: file('one') });
    expect((await call(h, 'GET', `${path('shop')}/3`, { headers: bearer(h.org) })).body).toEqual({
      error: 'recipe version not found',
    });
    expect((await call(h, 'GET', `${path('shop')}/0`, { headers: bearer(h.org) })).status).toBe(400);
    expect((await call(h, 'GET', `${path('shop')}/x`, { headers: bearer(h.org) })).status).toBe(400);
    for (const p of [path('shop'), `${path('shop')}/1`, path('nowhere')]) {
      const res = await call(h, 'GET', p, { headers: bearer(p.includes('nowhere') ? h.org : other) });
      expect(res).toMatchObject({ status: 404, body: { error: 'setup not found' } });
    }
  });
});
