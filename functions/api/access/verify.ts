import type { ALBEvent, ALBResult, LambdaFunctionURLEvent, LambdaFunctionURLResult } from 'aws-lambda';
import { openedLink, verifyAccess } from '../../core/applications/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { ACCESS_PATH, readVerifyPath } from '../../shared/access-token.js';

/**
 * The front door's access verifier: a Gateway's external auth (Envoy Gateway's SecurityPolicy, the
 * ExternalAuth filter) or an Ingress's asks it about each visitor of a protected preview on EKS
 * (core/access-verify.ts). Thin: the event in, the answer out. Two ways in, one answer:
 * - the stack's internal Application Load Balancer (its listener's default action, multi-value headers
 *   on): what a Gateway reaches, since the auth request carries the visitor's `Host` and a load balancer's
 *   default action routes by none;
 * - a Lambda function URL, whose payload carries the `Cookie` header in `cookies` and takes `Set-Cookie`s
 *   the same way (it routes by `Host`, so only callers that send the verifier's own can use it).
 * A request for ACCESS_PATH itself is a visitor's opened link (an app's access Ingress routes it here): a
 * redirect to the app's `/` (core/access-verify.ts `openedLink`).
 */
export async function handler(event: LambdaFunctionURLEvent): Promise<LambdaFunctionURLResult>;
export async function handler(event: ALBEvent): Promise<ALBResult>;
export async function handler(
  event: LambdaFunctionURLEvent | ALBEvent,
): Promise<LambdaFunctionURLResult | ALBResult> {
  const request =
    'elb' in (event.requestContext ?? {})
      ? fromAlb(event as ALBEvent)
      : fromUrl(event as LambdaFunctionURLEvent);
  const { headers, path, rawQuery, query, cookie } = request;
  // A Gateway's external auth: the scope in the path, the visitor's Host and path (VERIFY_PREFIX).
  const gateway = readVerifyPath(path, rawQuery, headers.host, headers['x-forwarded-proto']);
  // The link's own request, routed here by the app's access Ingress after the external auth passed it.
  const answer = gateway
    ? await verifyAccess(secretStore(), { ...gateway, cookie, nowMs: Date.now(), redirectLink: true })
    : path === ACCESS_PATH
      ? openedLink()
      : await verifyAccess(secretStore(), {
          query,
          cookie,
          originalUrl: headers['x-original-url'],
          nowMs: Date.now(),
        });
  if (request.alb)
    // Multi-value headers: each Set-Cookie a value of its own.
    return {
      statusCode: answer.statusCode,
      statusDescription: `${answer.statusCode}`,
      multiValueHeaders: {
        ...Object.fromEntries(Object.entries(answer.headers).map(([k, v]) => [k, [String(v)]])),
        ...(answer.cookies.length ? { 'set-cookie': answer.cookies } : {}),
      },
      body: answer.body ?? '',
      isBase64Encoded: false,
    };
  return {
    statusCode: answer.statusCode,
    headers: answer.headers,
    ...(answer.cookies.length ? { cookies: answer.cookies } : {}),
    body: answer.body,
  };
}

/** What the verifier reads of a request, whichever way it came in. */
interface VerifyRequest {
  alb: boolean;
  headers: Record<string, string | undefined>;
  path: string;
  rawQuery: string;
  query: Record<string, string | undefined>;
  cookie: string | undefined;
}

function fromUrl(event: LambdaFunctionURLEvent): VerifyRequest {
  const headers = event.headers ?? {};
  return {
    alb: false,
    headers,
    path: event.rawPath,
    rawQuery: event.rawQueryString ?? '',
    query: event.queryStringParameters ?? {},
    cookie: event.cookies?.length ? event.cookies.join('; ') : headers.cookie,
  };
}

/**
 * An ALB event with multi-value headers (the target group's `lambda.multi_value_headers.enabled`), or
 * single-value ones. Its query values arrive as sent (still percent-encoded): the raw query is rebuilt
 * from them, and the decoded ones read from it.
 */
function fromAlb(event: ALBEvent): VerifyRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(event.multiValueHeaders ?? {}))
    headers[k.toLowerCase()] = k.toLowerCase() === 'cookie' ? v?.join('; ') : v?.[0];
  for (const [k, v] of Object.entries(event.headers ?? {})) headers[k.toLowerCase()] ??= v;
  const pairs: [string, string][] = event.multiValueQueryStringParameters
    ? Object.entries(event.multiValueQueryStringParameters).flatMap(([k, vs]) =>
        (vs ?? []).map((v): [string, string] => [k, v]),
      )
    : Object.entries(event.queryStringParameters ?? {}).map(([k, v]): [string, string] => [k, v ?? '']);
  const rawQuery = pairs.map(([k, v]) => (v === '' ? k : `${k}=${v}`)).join('&');
  return {
    alb: true,
    headers,
    path: event.path,
    rawQuery,
    query: Object.fromEntries(new URLSearchParams(rawQuery)),
    cookie: headers.cookie,
  };
}
