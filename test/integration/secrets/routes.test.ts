import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { keys } from '../../../functions/manifest/tables.js';
import { LocalSecretStore } from '../../../functions/ports/secret-store/local-files.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { closeSnapshots, scanTable, secretFiles } from '../../support/stored-state.js';

const h = localServerForFile();
let auth: Record<string, string>;
let appId: string;
let store: LocalSecretStore;
const SECRET = 'sk_live_do-not-leak-4f1c2a';
const base = () => `/v1/preview/secrets/${appId}/web`;
const values = (app = 'web', id = appId) => store.read({ applicationId: id, app });
const keysOf = async (path = base(), headers = auth) => (await call(h, 'GET', path, { headers })).body.keys;

beforeAll(async () => {
  auth = bearer(h.org);
  appId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/web' })).applicationId;
  store = new LocalSecretStore(h.dataDir);
});
afterAll(async () => {
  closeSnapshots();
});

/** Everything the secrets routes store: the metadata table and the encrypted value files. */
const stored = async () => ({ bundles: await scanTable('secretBundles'), files: secretFiles(h.dataDir) });

describe('secret bundles', () => {
  test('an application with no bundle lists an empty array', async () => {
    const res = await call(h, 'GET', base(), { headers: auth });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ applicationId: appId, app: 'web', keys: [] });
  });

  test('batch upsert creates the bundle; the listing shows metadata, never values', async () => {
    const res = await call(h, 'PUT', base(), {
      body: {
        items: [
          { key: 'API_TOKEN', value: SECRET },
          { key: 'EMPTY', value: '' },
        ],
      },
      headers: auth,
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ applicationId: appId, app: 'web', status: 'saved', count: 2 });
    const list = await call(h, 'GET', base(), { headers: auth });
    expect(list.body.keys).toEqual([
      { key: 'API_TOKEN', maskedLength: SECRET.length, updatedAt: expect.any(String) },
      { key: 'EMPTY', maskedLength: 0, updatedAt: expect.any(String) },
    ]);
    expect(list.text).not.toContain(SECRET);
    expect(await values()).toEqual({ API_TOKEN: SECRET, EMPTY: '' });
  });

  test('later batches merge and keep keys they do not name; duplicates count once', async () => {
    const res = await call(h, 'PUT', base(), {
      body: {
        items: [
          { key: 'DB_URL', value: 'postgres://x' },
          { key: 'DB_URL', value: 'postgres://y' },
        ],
      },
      headers: auth,
    });
    expect(res.body.count).toBe(1);
    expect(await values()).toEqual({ API_TOKEN: SECRET, EMPTY: '', DB_URL: 'postgres://y' });
  });

  test('maskedLength counts characters and is capped at 32', async () => {
    await call(h, 'PUT', `${base()}/LONG`, { body: { value: 'x'.repeat(100) }, headers: auth });
    await call(h, 'PUT', `${base()}/EMOJI`, { body: { value: '🔑🔑🔑' }, headers: auth });
    const keys = await keysOf();
    expect(keys.find((k: { key: string }) => k.key === 'LONG').maskedLength).toBe(32);
    expect(keys.find((k: { key: string }) => k.key === 'EMOJI').maskedLength).toBe(3);
  });

  test('single-key upsert and delete', async () => {
    const put = await call(h, 'PUT', `${base()}/SINGLE`, { body: { value: 'one' }, headers: auth });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ applicationId: appId, app: 'web', key: 'SINGLE', status: 'saved' });
    const del = await call(h, 'DELETE', `${base()}/SINGLE`, { headers: auth });
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ applicationId: appId, app: 'web', key: 'SINGLE', status: 'deleted' });
    expect((await values())?.SINGLE).toBeUndefined();
    expect((await keysOf()).map((k: { key: string }) => k.key)).not.toContain('SINGLE');
    const again = await call(h, 'DELETE', `${base()}/SINGLE`, { headers: auth });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ error: 'secret key not found' });
  });

  // Hardening, "a rejected request changes nothing": the lease was taken by upsert before the not-found
  // check, so each such DELETE left a bundle row behind and any caller could grow the table without bound.
  test('deleting from a bundle that was never written is 404 and stores nothing', async () => {
    const before = await stored();
    for (let i = 0; i < 10; i++) {
      const res = await call(h, 'DELETE', `/v1/preview/secrets/${appId}/worker-${i}/ANY`, { headers: auth });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'secret bundle not found' });
    }
    expect(await stored()).toEqual(before);
  });

  test('deleting a key a bundle does not hold is 404 and changes nothing', async () => {
    const before = await stored();
    const res = await call(h, 'DELETE', `${base()}/NEVER_SET`, { headers: auth });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'secret key not found' });
    expect(await stored()).toEqual(before);
  });

  test('a refused first write (bundle over 64 KB) leaves no bundle row behind', async () => {
    const before = await stored();
    const res = await call(h, 'PUT', `/v1/preview/secrets/${appId}/too-big`, {
      body: { items: [{ key: 'A', value: 'x'.repeat(65_536) }] },
      headers: auth,
    });
    expect(res.status).toBe(400);
    expect(await stored()).toEqual(before);
    expect(await keysOf(`/v1/preview/secrets/${appId}/too-big`)).toEqual([]);
  });

  test('20 concurrent single-key upserts to one bundle lose none', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `CONCURRENT_${i}`);
    const results = await Promise.all(
      keys.map((k) =>
        call(h, 'PUT', `/v1/preview/secrets/${appId}/race/${k}`, {
          body: { value: `v-${k}` },
          headers: auth,
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(keys.map(() => 200));
    const listed = (await keysOf(`/v1/preview/secrets/${appId}/race`)).map((k: { key: string }) => k.key);
    expect(listed.sort()).toEqual([...keys].sort());
    expect(await values('race')).toEqual(Object.fromEntries(keys.map((k) => [k, `v-${k}`])));
  });

  test('a bundle that would exceed 64 KB once merged is refused with 400 and nothing changes', async () => {
    const before = await values();
    const beforeKeys = await keysOf();
    const res = await call(h, 'PUT', base(), {
      // Each value is within the per-value limit; together with the stored keys they are not.
      body: {
        items: [
          { key: 'HALF_1', value: 'x'.repeat(33_000) },
          { key: 'HALF_2', value: 'y'.repeat(33_000) },
        ],
      },
      headers: auth,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/limit is 65536/);
    expect(await values()).toEqual(before);
    expect(await keysOf()).toEqual(beforeKeys);
  });

  const badBatch: [string, unknown][] = [
    ['malformed JSON', '{"items":['],
    ['an empty body', ''],
    ['an array body', [{ key: 'A', value: 'b' }]],
    ['no items', {}],
    ['empty items', { items: [] }],
    ['items not an array', { items: { key: 'A', value: 'b' } }],
    ['a key that is not an env var name', { items: [{ key: '1ABC', value: 'b' }] }],
    ['a key with a dash', { items: [{ key: 'A-B', value: 'b' }] }],
    ['a numeric value', { items: [{ key: 'A', value: 1 }] }],
    ['a missing value', { items: [{ key: 'A' }] }],
    ['a null value', { items: [{ key: 'A', value: null }] }],
    ['a missing key', { items: [{ value: 'b' }] }],
  ];
  test.each(badBatch)('batch upsert: 400 for %s, and nothing changes', async (_name, body) => {
    const before = await values();
    const beforeKeys = await keysOf();
    const res = await call(h, 'PUT', base(), { body, headers: auth });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(await values()).toEqual(before);
    expect(await keysOf()).toEqual(beforeKeys);
  });

  const badSingle: [string, string, unknown][] = [
    ['malformed JSON', 'API_TOKEN', '{"value":'],
    ['an empty body', 'API_TOKEN', ''],
    ['a missing value', 'API_TOKEN', {}],
    ['a numeric value', 'API_TOKEN', { value: 5 }],
    ['an array body', 'API_TOKEN', ['x']],
    ['a key that is not an env var name', 'BAD-KEY', { value: 'x' }],
  ];
  test.each(badSingle)('single upsert: 400 for %s, and nothing changes', async (_name, key, body) => {
    const before = await values();
    const res = await call(h, 'PUT', `${base()}/${key}`, { body, headers: auth });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(await values()).toEqual(before);
  });

  // A value over 65,536 characters was refused as `value must be a string`.
  test('a value over 65,536 characters: 400 saying so (single and batch), nothing changes', async () => {
    const before = await values();
    const long = 'x'.repeat(65_537);
    const single = await call(h, 'PUT', `${base()}/LONG`, { body: { value: long }, headers: auth });
    expect(single.status).toBe(400);
    expect(single.body.error).toMatch(/value must be at most 65536 characters/);
    const batch = await call(h, 'PUT', base(), {
      body: { items: [{ key: 'LONG', value: long }] },
      headers: auth,
    });
    expect(batch.status).toBe(400);
    expect(batch.body.error).toMatch(/value must be at most 65536 characters/);
    expect(await values()).toEqual(before);
    // A number is still `value must be a string`.
    const number = await call(h, 'PUT', `${base()}/LONG`, { body: { value: 5 }, headers: auth });
    expect(number.body.error).toMatch(/value must be a string/);
  });

  // Hardening, user-chosen keys: PUT of key `__proto__` was accepted and set the prototype of the stored key
  // map, so the listing showed phantom keys `maskedLength` and `updatedAt` that could not be deleted.
  test('a secret key __proto__ is refused with 400 (single, batch, delete) and nothing is stored', async () => {
    const before = await stored();
    const beforeKeys = await keysOf();
    const single = await call(h, 'PUT', `${base()}/__proto__`, { body: { value: 'x' }, headers: auth });
    expect(single.status).toBe(400);
    expect(single.body).toEqual({ error: 'invalid path: key: must not be __proto__' });
    const batch = await call(h, 'PUT', base(), {
      body: {
        items: [
          { key: 'FINE', value: 'y' },
          { key: '__proto__', value: 'x' },
        ],
      },
      headers: auth,
    });
    expect(batch.status).toBe(400);
    expect(batch.body).toEqual({ error: 'invalid request body: items[1].key: must not be __proto__' });
    const fresh = await call(h, 'PUT', `/v1/preview/secrets/${appId}/proto/__proto__`, {
      body: { value: 'x' },
      headers: auth,
    });
    expect(fresh.status).toBe(400);
    const del = await call(h, 'DELETE', `${base()}/__proto__`, { headers: auth });
    expect(del.status).toBe(400);
    expect(await stored()).toEqual(before);
    const listed = await keysOf();
    expect(listed).toEqual(beforeKeys);
    const names = listed.map((k: { key: string }) => k.key);
    for (const phantom of ['maskedLength', 'updatedAt', '__proto__', 'FINE'])
      expect(names).not.toContain(phantom);
    expect(await keysOf(`/v1/preview/secrets/${appId}/proto`)).toEqual([]);
  });

  test('Object property names are ordinary secret keys: stored, listed, counted and deleted', async () => {
    const names = ['constructor', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf'];
    const path = `/v1/preview/secrets/${appId}/names`;
    const one = await call(h, 'PUT', `${path}/constructor`, { body: { value: 'c-value' }, headers: auth });
    expect(one.status).toBe(200);
    const batch = await call(h, 'PUT', path, {
      body: { items: names.slice(1).map((key) => ({ key, value: `${key}-value` })) },
      headers: auth,
    });
    expect(batch.body).toMatchObject({ status: 'saved', count: 4 });
    const listed = await keysOf(path);
    expect(listed).toEqual(
      [...names].sort().map((key) => ({
        key,
        maskedLength: key === 'constructor' ? 7 : `${key}-value`.length,
        updatedAt: expect.any(String),
      })),
    );
    expect(await values('names')).toEqual({
      constructor: 'c-value',
      ...Object.fromEntries(names.slice(1).map((k) => [k, `${k}-value`])),
    });
    for (const [i, key] of names.entries()) {
      const del = await call(h, 'DELETE', `${path}/${key}`, { headers: auth });
      expect(del.status).toBe(200);
      expect((await keysOf(path)).map((k: { key: string }) => k.key)).toEqual(names.slice(i + 1).sort());
      const again = await call(h, 'DELETE', `${path}/${key}`, { headers: auth });
      expect(again.body).toEqual({ error: 'secret key not found' });
    }
    expect(await values('names')).toEqual({});
  });

  test('a key that an Object has (toString) is "not found" in a bundle that lacks it', async () => {
    const res = await call(h, 'DELETE', `${base()}/toString`, { headers: auth });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'secret key not found' });
  });

  test('400 for an app name that is not a DNS label', async () => {
    const res = await call(h, 'GET', `/v1/preview/secrets/${appId}/Web_App`, { headers: auth });
    expect(res.status).toBe(400);
  });

  test('404 on every secrets route for an unknown application', async () => {
    const path = '/v1/preview/secrets/nosuchapplication000000000/web';
    for (const [method, p, body] of [
      ['GET', path, undefined],
      ['PUT', path, { items: [{ key: 'A', value: 'b' }] }],
      ['PUT', `${path}/A`, { value: 'b' }],
      ['DELETE', `${path}/A`, undefined],
    ] as const) {
      const res = await call(h, method, p, { body, headers: auth });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'application not found' });
    }
  });

  test("another organization gets 404 on every route for this org's application and changes nothing", async () => {
    const theirs = bearer(await h.newOrg());
    const before = await values();
    const beforeKeys = await keysOf();
    for (const [method, p, body] of [
      ['GET', base(), undefined],
      ['PUT', base(), { items: [{ key: 'API_TOKEN', value: 'stolen' }] }],
      ['PUT', `${base()}/API_TOKEN`, { value: 'stolen' }],
      ['DELETE', `${base()}/API_TOKEN`, undefined],
    ] as const) {
      const res = await call(h, method, p, { body, headers: theirs });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'application not found' });
    }
    expect(await values()).toEqual(before);
    expect(await keysOf()).toEqual(beforeKeys);
  });

  test('401 without credentials', async () => {
    const res = await call(h, 'GET', base());
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      error:
        'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    });
  });

  test('a secret for an app no environment declares is saved, with a warning naming the declared apps', async () => {
    const shop = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/Shop' })).applicationId;
    const put = (app: string, key = 'TOKEN') =>
      call(h, 'PUT', `/v1/preview/secrets/${shop}/${app}`, {
        body: { items: [{ key, value: 'v' }] },
        headers: auth,
      });
    // No environment has read its preview.yaml yet: nothing to compare with, no warning.
    expect((await put('wbe')).body).toEqual({ applicationId: shop, app: 'wbe', status: 'saved', count: 1 });
    // Environments as the pipeline records them once preview.yaml is read (`apps`), one still building
    // (none yet), and a repository whose name begins like this one's.
    const env = (repo: string, pr: number, apps?: string[]) =>
      ddb().send(
        new PutCommand({
          TableName: table('environments'),
          Item: { orgId: h.org.orgId, envKey: keys.environments.envKey(repo, pr), ...(apps ? { apps } : {}) },
        }),
      );
    await env('acme/shop', 1, ['web']);
    await env('acme/shop', 2, ['api', 'web']);
    await env('acme/shop', 3);
    await env('acme/shopping', 1, ['wbe']);
    const misspelt = await put('wbe');
    expect(misspelt.status).toBe(200);
    expect(misspelt.body).toEqual({
      applicationId: shop,
      app: 'wbe',
      status: 'saved',
      count: 1,
      warning: 'no environment of acme/Shop declares an app "wbe" (they declare api, web)',
    });
    expect(await values('wbe', shop)).toEqual({ TOKEN: 'v' }); // saved all the same
    const single = await call(h, 'PUT', `/v1/preview/secrets/${shop}/wbe/OTHER`, {
      body: { value: 'x' },
      headers: auth,
    });
    expect(single.body.warning).toBe(
      'no environment of acme/Shop declares an app "wbe" (they declare api, web)',
    );
    // A declared app gets no warning.
    expect((await put('api')).body).toEqual({ applicationId: shop, app: 'api', status: 'saved', count: 1 });
  });

  test('no secret value ever reaches a log line', () => {
    const all = h.logs.join('\n');
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain('postgres://y');
    expect(all).not.toContain('v-CONCURRENT_1');
  });
});
