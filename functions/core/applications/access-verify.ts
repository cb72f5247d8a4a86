import type { SecretStore } from '../../ports/secret-store/port.js';
import {
  ACCESS_PATH,
  type AccessScope,
  accessSetCookie,
  checkAccessToken,
  cookieValue,
} from '../../shared/access-token.js';
import { accessKey } from './access.js';

/*
 * The access verifier of protected previews on EKS: ingress-nginx asks it about every request
 * to a protected app (external auth, the Ingress's `auth-url`, eks/front-door.ts), with the environment in
 * the query (`org`, `env`, `app` = the application whose access key signs its tokens) and the visitor's
 * headers: its `Cookie`, and `X-Original-URL`, the URL asked for. 200 lets the request through, 401 refuses
 * it. An opened link (ACCESS_PATH with `token`) is let through with a `Set-Cookie` (ingress-nginx hands it to
 * the browser: `auth-always-set-cookie`), host-only on the app's host since the browser asked that host.
 * The answer says how long ingress-nginx may keep it (`Cache-Control`; the Ingress's `auth-cache-duration`
 * is the same 60 s), so a page load costs one check. Nothing in an answer names the key or the token.
 */

/** How long an access key read is reused (a rotated key refuses old cookies within this, plus the cache). */
export const KEY_CACHE_MS = 5_000;
/** How long a 200 may be kept by the ingress (Cache-Control max-age). */
export const ALLOW_MAX_AGE_SECONDS = 60;

export interface VerifyRequest {
  /** The auth-url's query: org, env, app. */
  query: Record<string, string | undefined>;
  /** The visitor's `Cookie` header (all of it). */
  cookie?: string;
  /** `X-Original-URL`: what the visitor asked for. */
  originalUrl?: string;
  nowMs: number;
  /**
   * A Gateway's external auth asked (the scope in the path): an opened link is answered with its cookie
   * and a redirect to `/` itself, which the gateway hands to the visitor as it does every refusal, since
   * a gateway passes on no header of an answer that lets a request through (eks/door/gateway.ts).
   */
  redirectLink?: boolean;
}

export interface VerifyAnswer {
  statusCode: 200 | 302 | 401;
  headers: Record<string, string>;
  /** `Set-Cookie` values (an opened link's cookie). */
  cookies: string[];
  body: string;
}

const keys = new Map<string, { key: string | undefined; at: number }>();

/** The application's access key, reused for KEY_CACHE_MS. */
async function keyOf(
  secrets: SecretStore,
  applicationId: string,
  nowMs: number,
): Promise<string | undefined> {
  const hit = keys.get(applicationId);
  if (hit && nowMs - hit.at < KEY_CACHE_MS) return hit.key;
  const key = await accessKey(secrets, applicationId);
  keys.set(applicationId, { key, at: nowMs });
  return key;
}

/** Forget every cached key (tests). */
export const forgetAccessKeys = () => keys.clear();

const refuse = (): VerifyAnswer => ({
  statusCode: 401,
  headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' },
  cookies: [],
  body: 'This preview is protected: open it with the link in the pull request or on the dashboard.\n',
});
const allow = (cookies: string[] = []): VerifyAnswer => ({
  statusCode: 200,
  headers: {
    'content-type': 'text/plain; charset=utf-8',
    // A link's answer carries a cookie of its own: never kept for another visitor.
    'cache-control': cookies.length ? 'no-store' : `private, max-age=${ALLOW_MAX_AGE_SECONDS}`,
  },
  cookies,
  body: 'ok\n',
});

/**
 * A visitor's own request for ACCESS_PATH, which the app's access Ingress routes here (eks/front-door.ts)
 * once the external auth let it through (a valid link: ingress-nginx adds the auth answer's `Set-Cookie`
 * to this response): back to the app's `/`, relative, so on the preview's own host. It sets nothing, so
 * a request that reaches it any other way (the function URL itself) gains nothing.
 */
export const openedLink = (): VerifyAnswer => ({
  statusCode: 302,
  headers: { location: '/', 'cache-control': 'no-store', 'content-type': 'text/plain; charset=utf-8' },
  cookies: [],
  body: 'Opening the preview…\n',
});

/** The link's token, when the visitor opened ACCESS_PATH with one. */
function linkToken(originalUrl: string | undefined): string | undefined {
  if (!originalUrl) return undefined;
  try {
    const url = new URL(originalUrl);
    return url.pathname === ACCESS_PATH ? (url.searchParams.get('token') ?? undefined) : undefined;
  } catch {
    return undefined;
  }
}

export async function verifyAccess(secrets: SecretStore, req: VerifyRequest): Promise<VerifyAnswer> {
  const { org, env, app } = req.query;
  if (!org || !env || !app) return refuse();
  const scope: AccessScope = { orgId: org, envKey: env };
  const link = linkToken(req.originalUrl);
  const cookie = cookieValue(req.cookie);
  if (!link && !cookie) return refuse();
  const key = await keyOf(secrets, app, req.nowMs);
  if (link && checkAccessToken(key, scope, link, req.nowMs) === 'ok') {
    const set = accessSetCookie(link, req.nowMs, new URL(req.originalUrl!).protocol === 'https:');
    return req.redirectLink ? { ...openedLink(), cookies: [set] } : allow([set]);
  }
  if (cookie && checkAccessToken(key, scope, cookie, req.nowMs) === 'ok') return allow();
  return refuse();
}
