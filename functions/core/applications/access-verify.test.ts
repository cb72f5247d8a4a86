import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { SecretsManagerStore } from '../../ports/secret-store/secrets-manager.js';
import { ACCESS_COOKIE, ACCESS_PATH, signAccessToken } from '../../shared/access-token.js';
import { forgetAccessKeys, KEY_CACHE_MS, verifyAccess } from './access-verify.js';

/*
 * The access verifier's logic against the real SecretsManagerStore over a mocked Secrets Manager client
 * (aws-sdk-client-mock): what it lets through, what it refuses, what it caches.
 */

const KEY = 'k'.repeat(43);
const OTHER_KEY = 'o'.repeat(43);
const NOW = Date.parse('2026-11-26T12:00:00Z');
const scope = { orgId: 'org-1', envKey: 'acme/shop#7' };
const query = { org: scope.orgId, env: scope.envKey, app: 'app-1' };
const sm = mockClient(SecretsManagerClient);
const store = new SecretsManagerStore(new SecretsManagerClient({ region: 'eu-west-1' }), 'preview');
const setKey = (key: string) =>
  sm
    .on(GetSecretValueCommand, { SecretId: 'preview/app-1/_access' })
    .resolves({ SecretString: JSON.stringify({ PREVIEW_ACCESS_KEY: key }) });

beforeEach(() => {
  sm.reset();
  forgetAccessKeys();
  setKey(KEY);
});

describe('verifyAccess', () => {
  test('a valid cookie for that environment: 200, cacheable, no key in the answer', async () => {
    const token = signAccessToken(KEY, scope, NOW);
    const a = await verifyAccess(store, { query, cookie: `x=1; ${ACCESS_COOKIE}=${token}`, nowMs: NOW });
    expect(a.statusCode).toBe(200);
    expect(a.headers['cache-control']).toBe('private, max-age=60');
    expect(a.cookies).toEqual([]);
    expect(JSON.stringify(a)).not.toContain(KEY);
    expect(sm.commandCalls(GetSecretValueCommand)[0]!.args[0].input.SecretId).toBe('preview/app-1/_access');
  });

  test('no cookie, another environment’s, another key’s or an expired one: 401, not cached', async () => {
    const cases = [
      undefined,
      `${ACCESS_COOKIE}=${signAccessToken(KEY, { ...scope, envKey: 'acme/shop#8' }, NOW)}`,
      `${ACCESS_COOKIE}=${signAccessToken(KEY, { ...scope, orgId: 'org-2' }, NOW)}`,
      `${ACCESS_COOKIE}=${signAccessToken(OTHER_KEY, scope, NOW)}`,
      `${ACCESS_COOKIE}=${signAccessToken(KEY, scope, NOW - 8 * 24 * 3600_000)}`,
      `${ACCESS_COOKIE}=garbage`,
    ];
    for (const cookie of cases) {
      const a = await verifyAccess(store, { query, cookie, nowMs: NOW });
      expect([cookie, a.statusCode, a.headers['cache-control']]).toEqual([cookie, 401, 'no-store']);
    }
    // The environment missing from the auth-url: refused without a read.
    forgetAccessKeys();
    sm.resetHistory();
    const token = signAccessToken(KEY, scope, NOW);
    const a = await verifyAccess(store, {
      query: { org: 'org-1' },
      cookie: `${ACCESS_COOKIE}=${token}`,
      nowMs: NOW,
    });
    expect(a.statusCode).toBe(401);
    expect(sm.commandCalls(GetSecretValueCommand)).toHaveLength(0);
  });

  test('an application without a key (its secret missing) lets nobody in', async () => {
    sm.reset();
    sm.on(GetSecretValueCommand).rejects(
      Object.assign(new Error('not found'), { name: 'ResourceNotFoundException' }),
    );
    const token = signAccessToken(KEY, scope, NOW);
    const a = await verifyAccess(store, { query, cookie: `${ACCESS_COOKIE}=${token}`, nowMs: NOW });
    expect(a.statusCode).toBe(401);
  });

  test('an opened link: 200 with a host-only, HttpOnly, Secure cookie, never cached', async () => {
    const token = signAccessToken(KEY, scope, NOW);
    const originalUrl = `https://web-pv-acme-shop-7.preview.example.com${ACCESS_PATH}?token=${token}`;
    const a = await verifyAccess(store, { query, originalUrl, nowMs: NOW });
    expect(a.statusCode).toBe(200);
    expect(a.headers['cache-control']).toBe('no-store');
    expect(a.cookies).toHaveLength(1);
    expect(a.cookies[0]).toMatch(new RegExp(`^${ACCESS_COOKIE}=${token}; Path=/; Max-Age=604800; HttpOnly`));
    expect(a.cookies[0]).toContain('; Secure');
    expect(a.cookies[0]).not.toContain('Domain=');
    // A token in another path's query is no link.
    const elsewhere = await verifyAccess(store, {
      query,
      originalUrl: `https://web-pv-acme-shop-7.preview.example.com/other?token=${token}`,
      nowMs: NOW,
    });
    expect(elsewhere.statusCode).toBe(401);
  });

  test('a rotated key refuses the old cookie once the key cache has passed', async () => {
    const token = signAccessToken(KEY, scope, NOW);
    const cookie = `${ACCESS_COOKIE}=${token}`;
    expect((await verifyAccess(store, { query, cookie, nowMs: NOW })).statusCode).toBe(200);
    sm.reset();
    setKey(OTHER_KEY);
    expect((await verifyAccess(store, { query, cookie, nowMs: NOW + 1000 })).statusCode).toBe(200);
    expect(sm.commandCalls(GetSecretValueCommand)).toHaveLength(0);
    expect((await verifyAccess(store, { query, cookie, nowMs: NOW + KEY_CACHE_MS + 1 })).statusCode).toBe(
      401,
    );
  });
});
