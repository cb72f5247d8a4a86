import { beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { bearer, call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

/* The tests an organization imported, as users look for them (the listing and its folder filter). */

const h = localServerForFile();
let other: OrgCredentials;
beforeAll(async () => {
  other = await h.newOrg();
}, 60_000);

const testDef = (name: string, folder: string) => ({
  name,
  folder: { id: folder, name: folder.toUpperCase() },
  application_version: { name: 'v1', path: '/' },
  steps: [{ instruction: 'Open it', interaction: 'navigate', url: '/' }],
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
