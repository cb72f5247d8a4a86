import { describe, expect, test } from '@jest/globals';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import {
  ACCESS_PATH,
  accessSetCookie,
  checkAccessToken,
  cookieValue,
  signAccessToken,
} from '../../shared/access-token.js';
import { ValidationError } from '../../shared/errors.js';
import {
  accessKey,
  accessUrls,
  effectiveAccess,
  effectiveSleepMinutes,
  ensureAccessKey,
  parseAccessMode,
  parseSleepMinutes,
  rotateAccessKey,
} from './access.js';

/** An in-memory SecretStore. */
function memoryStore(): SecretStore & { bundles: Map<string, Record<string, string>> } {
  const bundles = new Map<string, Record<string, string>>();
  const k = (r: BundleRef) => `${r.applicationId}/${r.app}`;
  return {
    bundles,
    read: async (r) => bundles.get(k(r)),
    write: async (r, v) => {
      bundles.set(k(r), { ...v });
    },
  };
}

const scope = { orgId: 'org1', envKey: 'acme/shop#7' };
const now = Date.UTC(2026, 0, 1);

describe('access tokens', () => {
  test('a token opens its own environment until it expires, under its key only', () => {
    // Prepare
    const token = signAccessToken('key-a', scope, now, 60);
    // Act / Assess
    expect(token).toMatch(/^v1\.\d+\.[A-Za-z0-9_-]{43}$/);
    expect(checkAccessToken('key-a', scope, token, now)).toBe('ok');
    expect(checkAccessToken('key-a', scope, token, now + 59_000)).toBe('ok');
    expect(checkAccessToken('key-a', scope, token, now + 60_000)).toBe('expired');
    expect(checkAccessToken('key-b', scope, token, now)).toBe('forbidden');
    expect(checkAccessToken(undefined, scope, token, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', { ...scope, envKey: 'acme/shop#8' }, token, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', { ...scope, orgId: 'org2' }, token, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', scope, undefined, now)).toBe('missing');
  });

  test('a changed expiry or a mangled signature is refused', () => {
    const token = signAccessToken('key-a', scope, now, 60);
    const [, exp, sig] = token.split('.');
    expect(checkAccessToken('key-a', scope, `v1.${Number(exp) + 3600}.${sig}`, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', scope, `v1.${exp}.${sig!.slice(1)}A`, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', scope, `v2.${exp}.${sig}`, now)).toBe('forbidden');
    expect(checkAccessToken('key-a', scope, 'garbage', now)).toBe('forbidden');
  });

  test('cookies: read by name; set host-only and HttpOnly for the rest of the token life', () => {
    expect(cookieValue('a=1; preview_access=v1.2.x; b=3')).toBe('v1.2.x');
    expect(cookieValue('xpreview_access=1')).toBeUndefined();
    expect(cookieValue(undefined)).toBeUndefined();
    const token = signAccessToken('k', scope, now, 120);
    const set = accessSetCookie(token, now, false);
    expect(set).toBe(`preview_access=${token}; Path=/; Max-Age=120; HttpOnly; SameSite=Lax`);
    expect(set).not.toMatch(/Domain=/i);
    expect(accessSetCookie(token, now, true)).toMatch(/; Secure$/);
  });
});

describe('access settings', () => {
  test('defaults: protected in AWS, public locally; PR previews sleep after 30 minutes, main never', () => {
    expect(effectiveAccess({}, 'aws')).toBe('protected');
    expect(effectiveAccess({}, 'local')).toBe('public');
    expect(effectiveAccess({ access: 'public' }, 'aws')).toBe('public');
    expect(effectiveAccess({ access: 'protected' }, 'local')).toBe('protected');
    expect(effectiveSleepMinutes({}, 7)).toBe(30);
    expect(effectiveSleepMinutes({}, 0)).toBe(0);
    expect(effectiveSleepMinutes({ sleepAfterMinutes: 0.05 }, 7)).toBe(0.05);
    expect(effectiveSleepMinutes({ sleepAfterMinutes: 5 }, 0)).toBe(0);
  });

  test('parsing refuses what is not a mode or a number of minutes', () => {
    expect(parseAccessMode('protected')).toBe('protected');
    expect(() => parseAccessMode('private')).toThrow(ValidationError);
    expect(parseSleepMinutes('0')).toBe(0);
    expect(parseSleepMinutes('0.05')).toBe(0.05);
    for (const bad of ['-1', 'abc', '', '1e3', `${7 * 24 * 60 + 1}`])
      expect(() => parseSleepMinutes(bad)).toThrow(ValidationError);
  });

  test('the key lives in the secret store; rotation replaces it and refuses links signed before', async () => {
    // Prepare
    const store = memoryStore();
    expect(await accessKey(store, 'app1')).toBeUndefined();
    expect(accessUrls(undefined, scope, { web: 'http://x' })).toBeUndefined();
    const first = await ensureAccessKey(store, 'app1');
    expect(await ensureAccessKey(store, 'app1')).toBe(first);
    // Act
    const links = accessUrls(first, scope, { web: 'http://web--shop-7.localhost:4100/' }, now)!;
    const token = new URL(links.web!).searchParams.get('token')!;
    const second = await rotateAccessKey(store, 'app1');
    // Assess
    expect(links.web).toMatch(new RegExp(`^http://web--shop-7\\.localhost:4100${ACCESS_PATH}\\?token=`));
    expect(checkAccessToken(first, scope, token, now)).toBe('ok');
    expect(second).not.toBe(first);
    expect(checkAccessToken(await accessKey(store, 'app1'), scope, token, now)).toBe('forbidden');
    expect([...store.bundles.keys()]).toEqual(['app1/_access']);
  });
});
