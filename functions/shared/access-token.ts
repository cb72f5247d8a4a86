import { createHmac, timingSafeEqual } from 'node:crypto';

/*
 * Access to a protected preview: a token per environment, signed with its application's access
 * key (core/access.ts keeps the key in the secret store). The same token is the link's `token` query and
 * the cookie's value, so a link opened once lets its browser in until the token expires. Rotating the key
 * refuses every token signed before. The token names no secret: `v1.<expires>.<sig>`, where `sig` is the
 * HMAC-SHA256 (base64url) of `access\n<orgId>\n<envKey>\n<expires>`, so a token of one environment opens
 * no other. Pure functions: the front doors (local: runtime/local/front-door.ts; EKS: the verifier) and
 * core (the links) share them.
 */

/** The cookie a front door sets from a link and reads on each request (host-only, HttpOnly). */
export const ACCESS_COOKIE = 'preview_access';
/** The path of an app's origin where a link is opened: it sets the cookie and redirects to `/`. */
export const ACCESS_PATH = '/__preview/access';
/**
 * Where a Gateway's external auth asks the verifier (eks/door/gateway.ts): the environment in the path
 * (`<prefix>/<org>/<env>/<application>`, each URI-encoded), the visitor's own path and query appended by
 * the gateway, the visitor's `Host` kept. So the verifier reads whose preview from the path alone and the
 * URL asked for from `Host` and the rest of the path; it never routes by `Host`.
 */
export const VERIFY_PREFIX = '/__preview/verify';

/** The external auth's path prefix for one environment (see VERIFY_PREFIX). */
export function verifyPath(scope: AccessScope & { applicationId?: string }): string {
  return [VERIFY_PREFIX, scope.orgId, scope.envKey, scope.applicationId ?? '-']
    .map((part, i) => (i ? encodeURIComponent(part) : part))
    .join('/');
}

/**
 * A request to VERIFY_PREFIX read back: whose preview, and the URL the visitor asked for (`https` unless
 * the gateway says otherwise). Undefined when the path is not one.
 */
export function readVerifyPath(
  rawPath: string,
  rawQuery: string,
  host: string | undefined,
  proto = 'https',
): { query: { org: string; env: string; app: string }; originalUrl: string } | undefined {
  if (!rawPath.startsWith(`${VERIFY_PREFIX}/`) || !host) return undefined;
  const [org, env, app, ...rest] = rawPath.slice(VERIFY_PREFIX.length + 1).split('/');
  try {
    const [o, e, a] = [org, env, app].map((p) => decodeURIComponent(p ?? ''));
    if (!o || !e || !a || a === '-') return undefined;
    const path = `/${rest.join('/')}`;
    const originalUrl = `${proto === 'http' ? 'http' : 'https'}://${host}${path}${rawQuery ? `?${rawQuery}` : ''}`;
    return { query: { org: o, env: e, app: a }, originalUrl: new URL(originalUrl).toString() };
  } catch {
    return undefined;
  }
}

/** How long a link (and the cookie it sets) is good for: 7 days. */
export const ACCESS_TTL_SECONDS = 7 * 24 * 3600;

/** Whose token: the environment the token opens. */
export interface AccessScope {
  orgId: string;
  envKey: string;
}

function signature(key: string, scope: AccessScope, expires: number): string {
  return createHmac('sha256', key)
    .update(`access\n${scope.orgId}\n${scope.envKey}\n${expires}`, 'utf8')
    .digest('base64url');
}

/** A token opening `scope` until `nowMs + ttlSeconds`. */
export function signAccessToken(
  key: string,
  scope: AccessScope,
  nowMs: number,
  ttlSeconds = ACCESS_TTL_SECONDS,
): string {
  const expires = Math.floor(nowMs / 1000) + ttlSeconds;
  return `v1.${expires}.${signature(key, scope, expires)}`;
}

/** Why a token does not open a preview, or `ok`. A bad signature is told before the expiry. */
export type AccessCheck = 'ok' | 'missing' | 'forbidden' | 'expired';

/** Check `token` (a cookie's value or a link's query) for `scope` against the application's `key`. */
export function checkAccessToken(
  key: string | undefined,
  scope: AccessScope,
  token: string | undefined,
  nowMs: number,
): AccessCheck {
  if (!token) return 'missing';
  const m = /^v1\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m || !key) return 'forbidden';
  const expires = Number(m[1]);
  const expected = Buffer.from(signature(key, scope, expires));
  const given = Buffer.from(m[2]!);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'forbidden';
  return expires * 1000 <= nowMs ? 'expired' : 'ok';
}

/** The value of cookie `name` in a `Cookie` header, if present. */
export function cookieValue(header: string | undefined, name = ACCESS_COOKIE): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The link that lets a browser into the app at `appUrl`: its origin's ACCESS_PATH with the token. */
export const accessLink = (appUrl: string, token: string): string =>
  `${new URL(appUrl).origin}${ACCESS_PATH}?token=${encodeURIComponent(token)}`;

/**
 * The `Set-Cookie` of an opened link: host-only (no Domain: the browser sends it to this host name only,
 * whatever the port), HttpOnly, SameSite=Lax, for the token's remaining life.
 */
export function accessSetCookie(token: string, nowMs: number, secure: boolean): string {
  const expires = Number(token.split('.')[1] ?? 0);
  const maxAge = Math.max(0, expires - Math.floor(nowMs / 1000));
  return `${ACCESS_COOKIE}=${token}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
