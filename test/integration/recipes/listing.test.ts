import { beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { bearer, call } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

/* A setup's recipe versions, as users look for them (the listing and one version with its file). */

const h = localServerForFile();
let other: OrgCredentials;
beforeAll(async () => {
  other = await h.newOrg();
}, 60_000);

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
