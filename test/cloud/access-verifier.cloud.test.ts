import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { ALBEvent, ALBResult, LambdaFunctionURLEvent } from 'aws-lambda';
import { ACCESS_PATH, signAccessToken, verifyPath } from '../../functions/shared/access-token.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type Cloud, startCloud } from './cloud-tier.js';

/*
 * The front door's access verifier Lambda (functions/api/access/verify.ts, behind a function URL on EKS) in
 * the cloud simulation tier: the real handler in PREVIEW_MODE=aws, its Secrets Manager client pointed at
 * the loopback AWS fake, invoked with function-URL events as ingress-nginx's external auth sends them. It
 * lets a valid cookie through and refuses a missing, expired, forged or other environment's one, and a
 * rotated key's; an opened link gets its cookie; the link's own path redirects to `/`. Asked by a Gateway
 * (the scope in the path, the visitor's Host), it answers the same, and a link with its redirect and
 * cookie at once. No answer and no log line holds the key or a token.
 */

const APP = 'app-verify';
const scope = { orgId: 'org-verify', envKey: 'acme/shop#7' };
const HOST = 'web-pv-acme-shop-7-0123456789.previews.example.test';

let cloud: Cloud;
let key: string;
let access: typeof import('../../functions/core/applications/access.js');
let store: ReturnType<typeof import('../../functions/ports/registry/secret-store.js').secretStore>;
let forget: () => void;
const logs: string[] = [];
const keys: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  cloud = await startCloud();
  access = await import('../../functions/core/applications/access.js');
  store = (await import('../../functions/ports/registry/secret-store.js')).secretStore();
  forget = (await import('../../functions/core/applications/access-verify.js')).forgetAccessKeys;
  key = await access.ensureAccessKey(store, APP);
  keys.push(key);
}, 60_000);
afterAll(async () => {
  await cloud?.stop();
}, 30_000);

/** A function-URL event as ingress-nginx's auth subrequest makes it (`auth-url` with org, env, app). */
function authEvent(
  opts: { cookie?: string; originalUrl?: string; query?: Record<string, string> } = {},
): LambdaFunctionURLEvent {
  const query = opts.query ?? { org: scope.orgId, env: scope.envKey, app: APP };
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/',
    rawQueryString: new URLSearchParams(query).toString(),
    queryStringParameters: query,
    ...(opts.cookie ? { cookies: opts.cookie.split('; ') } : {}),
    headers: {
      host: 'abc123.lambda-url.eu-west-1.on.aws',
      'x-original-url': opts.originalUrl ?? `https://${HOST}/`,
      'x-forwarded-proto': 'https',
    },
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abc123',
      domainName: 'abc123.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'abc123',
      http: { method: 'GET', path: '/', protocol: 'HTTP/1.1', sourceIp: '10.0.0.1', userAgent: 'nginx' },
      requestId: `r-${Math.random()}`,
      routeKey: '$default',
      stage: '$default',
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    isBase64Encoded: false,
  } as LambdaFunctionURLEvent;
}
const verify = (event: LambdaFunctionURLEvent) =>
  cloud.invoke<{ statusCode: number; headers: Record<string, string>; cookies?: string[]; body?: string }>(
    'functions/api/access/verify.ts',
    event,
  );
const cookieOf = (token: string) => `other=1; preview_access=${token}`;

describe('the access verifier in AWS mode', () => {
  test('the key lives in Secrets Manager under the application, as the verifier reads it', () => {
    expect(cloud.aws.secrets.get(`preview/${APP}/_access`)).toContain(key);
  });

  test('a valid cookie: 200, cacheable by the ingress for 60 s, no cookie set', async () => {
    const a = await verify(authEvent({ cookie: cookieOf(signAccessToken(key, scope, Date.now())) }));
    expect(a.statusCode).toBe(200);
    expect(a.headers['cache-control']).toBe('private, max-age=60');
    expect(a.cookies).toBeUndefined();
  });

  test('missing, expired, forged, another environment’s or another key’s cookie: 401, never cached', async () => {
    const now = Date.now();
    const cases = {
      missing: authEvent(),
      'no query': authEvent({
        cookie: cookieOf(signAccessToken(key, scope, now)),
        query: { org: scope.orgId, env: scope.envKey },
      }),
      expired: authEvent({ cookie: cookieOf(signAccessToken(key, scope, now - 8 * 24 * 3600_000)) }),
      forged: authEvent({ cookie: cookieOf(`v1.${Math.floor(now / 1000) + 3600}.${'A'.repeat(43)}`) }),
      'other env': authEvent({
        cookie: cookieOf(signAccessToken(key, { ...scope, envKey: 'acme/shop#8' }, now)),
      }),
      'other key': authEvent({ cookie: cookieOf(signAccessToken('f'.repeat(64), scope, now)) }),
    };
    for (const [why, event] of Object.entries(cases)) {
      const a = await verify(event);
      expect([why, a.statusCode, a.headers['cache-control']]).toEqual([why, 401, 'no-store']);
      expect(a.cookies).toBeUndefined();
    }
  });

  test('an opened link: 200 with a host-only, HttpOnly, Secure cookie; its own path then redirects to /', async () => {
    const token = signAccessToken(key, scope, Date.now());
    const link = `https://${HOST}${ACCESS_PATH}?token=${encodeURIComponent(token)}`;
    const a = await verify(authEvent({ originalUrl: link }));
    expect(a.statusCode).toBe(200);
    expect(a.headers['cache-control']).toBe('no-store');
    expect(a.cookies).toEqual([
      expect.stringMatching(
        /^preview_access=v1\.\d+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/,
      ),
    ]);
    expect(a.cookies![0]).not.toMatch(/domain=/i);
    // A forged link is refused like a forged cookie.
    const forged = await verify(
      authEvent({ originalUrl: link.replace(/token=[^&]+/, 'token=v1.9999999999.x') }),
    );
    expect(forged.statusCode).toBe(401);
    // The link's own request, routed to the verifier by the access Ingress: back to the app's `/`.
    const own = authEvent({ originalUrl: link });
    own.rawPath = ACCESS_PATH;
    own.requestContext.http.path = ACCESS_PATH;
    const back = await verify(own);
    expect(back.statusCode).toBe(302);
    expect(back.headers.location).toBe('/');
    expect(back.cookies).toBeUndefined();
  });

  test("asked by a Gateway (SecurityPolicy extAuth, ExternalAuth filter): the visitor's Host, the scope in the path", async () => {
    // As Envoy sends it: the filter's path prefix, then the visitor's own path and query; `Host` is the
    // visitor's preview host, never the verifier's, and the verifier reads nothing from it but the URL.
    const gatewayEvent = (visitorPath: string, query: string, cookie?: string) => {
      const event = authEvent({ ...(cookie ? { cookie } : {}) });
      event.rawPath = `${verifyPath({ ...scope, applicationId: APP })}${visitorPath}`;
      event.rawQueryString = query;
      event.queryStringParameters = Object.fromEntries(new URLSearchParams(query));
      event.requestContext.http.path = event.rawPath;
      event.headers = { host: HOST, 'x-forwarded-proto': 'https' };
      return event;
    };
    const now = Date.now();
    const ok = await verify(gatewayEvent('/orders/7', 'tab=2', cookieOf(signAccessToken(key, scope, now))));
    expect([ok.statusCode, ok.cookies]).toEqual([200, undefined]);
    for (const [why, event] of Object.entries({
      'no cookie': gatewayEvent('/', ''),
      'other env': gatewayEvent(
        '/',
        '',
        cookieOf(signAccessToken(key, { ...scope, envKey: 'acme/shop#8' }, now)),
      ),
      'other scope in the path': (() => {
        const e = gatewayEvent('/', '', cookieOf(signAccessToken(key, scope, now)));
        e.rawPath = `${verifyPath({ ...scope, envKey: 'acme/shop#8', applicationId: APP })}/`;
        return e;
      })(),
      'no scope': (() => {
        const e = gatewayEvent('/', '', cookieOf(signAccessToken(key, scope, now)));
        e.rawPath = '/__preview/verify/only-org';
        return e;
      })(),
    })) {
      const a = await verify(event);
      expect([why, a.statusCode]).toEqual([why, 401]);
    }
    // An opened link: the verifier answers it itself, a redirect to / with the host-only cookie, which the
    // gateway hands to the visitor (the link's request never reaches the app).
    const token = signAccessToken(key, scope, now);
    const link = await verify(gatewayEvent(ACCESS_PATH, `token=${encodeURIComponent(token)}`));
    expect([link.statusCode, link.headers.location]).toEqual([302, '/']);
    expect(link.cookies).toEqual([
      expect.stringMatching(/^preview_access=v1\.[^;]+; Path=\/; .*HttpOnly.*; Secure$/),
    ]);
    expect(link.cookies![0]).not.toMatch(/domain=/i);
    expect(JSON.stringify(link)).not.toContain(key);
    const forged = await verify(gatewayEvent(ACCESS_PATH, 'token=v1.9999999999.x'));
    expect(forged.statusCode).toBe(401);
  });

  test("through the stack's internal load balancer (an ALB event): the visitor's Host, the same answers", async () => {
    // As the ALB hands it over (multi-value headers on): Envoy's auth request with the visitor's Host,
    // the query as sent (still encoded); the listener's default action routes by no Host.
    const albEvent = (visitorPath: string, query: Record<string, string[]>, cookie?: string) =>
      ({
        requestContext: {
          elb: { targetGroupArn: 'arn:aws:elasticloadbalancing:eu-west-1:1:targetgroup/v/1' },
        },
        httpMethod: 'GET',
        path: `${verifyPath({ ...scope, applicationId: APP })}${visitorPath}`,
        multiValueQueryStringParameters: query,
        multiValueHeaders: {
          host: [HOST],
          'x-forwarded-proto': ['https'],
          ...(cookie ? { cookie: [cookie] } : {}),
        },
        body: '',
        isBase64Encoded: false,
      }) as unknown as ALBEvent;
    const alb = (event: ALBEvent) => cloud.invoke<ALBResult>('functions/api/access/verify.ts', event);
    const now = Date.now();
    const ok = await alb(albEvent('/orders/7', { tab: ['2'] }, cookieOf(signAccessToken(key, scope, now))));
    expect([ok.statusCode, ok.multiValueHeaders?.['set-cookie']]).toEqual([200, undefined]);
    expect((await alb(albEvent('/', {}))).statusCode).toBe(401);
    const other = cookieOf(signAccessToken(key, { ...scope, envKey: 'acme/shop#8' }, now));
    expect((await alb(albEvent('/', {}, other))).statusCode).toBe(401);
    // An opened link (its token percent-encoded, as the ALB passes it): 302 to / with the host-only cookie.
    const token = signAccessToken(key, scope, now);
    const link = await alb(albEvent(ACCESS_PATH, { token: [encodeURIComponent(token)] }));
    expect([link.statusCode, link.multiValueHeaders?.location]).toEqual([302, ['/']]);
    expect(link.multiValueHeaders?.['set-cookie']).toEqual([
      expect.stringMatching(/^preview_access=v1\.[^;]+; Path=\/; .*HttpOnly.*; Secure$/),
    ]);
    expect(JSON.stringify(link)).not.toContain(key);
  });

  test('a rotated key refuses the old cookie (once its 5 s cache has passed: forgotten here)', async () => {
    const old = signAccessToken(key, scope, Date.now());
    expect((await verify(authEvent({ cookie: cookieOf(old) }))).statusCode).toBe(200);
    const fresh = await access.rotateAccessKey(store, APP);
    forget();
    expect((await verify(authEvent({ cookie: cookieOf(old) }))).statusCode).toBe(401);
    const now = signAccessToken(fresh, scope, Date.now());
    expect((await verify(authEvent({ cookie: cookieOf(now) }))).statusCode).toBe(200);
    keys.push(fresh);
  });

  test('no log line names a key', () => {
    expect(keys).toHaveLength(2);
    for (const k of keys) expect(logs.join('\n')).not.toContain(k);
  });
});
