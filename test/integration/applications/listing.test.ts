import { beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

/* The applications an organization has, as users look for them (the listing and its filter). */

const h = localServerForFile();
let other: OrgCredentials;
beforeAll(async () => {
  other = await h.newOrg();
}, 60_000);

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
      // Which pull requests get a preview, with the defaults filled in.
      skipLabel: 'no-preview',
      requireLabel: null,
      paths: [],
      skipAuthors: [],
      // The front door, with the local defaults: public on the loopback, asleep after 30 minutes.
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
