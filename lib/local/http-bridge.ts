import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import type { RouteDef } from '../../functions/manifest/routes.js';
import { HOST_RE } from '../../functions/shared/validation.js';

/** A route of the manifest compiled for matching request paths. */
export interface CompiledRoute<Id extends string = string> {
  id: Id;
  def: RouteDef;
  pattern: RegExp;
  names: string[];
}

/** Compile manifest paths: `{name}` matches one non-empty path segment, as in API Gateway. */
export function compileRoutes<Id extends string>(routes: Record<Id, RouteDef>): CompiledRoute<Id>[] {
  return (Object.entries(routes) as [Id, RouteDef][]).map(([id, def]) => {
    const names: string[] = [];
    const source = def.path
      .split('/')
      .map((seg) => {
        const m = /^\{(\w+)\}$/.exec(seg);
        if (!m) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(m[1]!);
        return '([^/]+)';
      })
      .join('/');
    return { id, def, pattern: new RegExp(`^${source}$`), names };
  });
}

/** The route and decoded path parameters for a method and path, or undefined (→ 404). */
export function matchRoute<Id extends string>(
  compiled: CompiledRoute<Id>[],
  method: string,
  path: string,
): { route: CompiledRoute<Id>; params: Record<string, string> } | undefined {
  for (const route of compiled) {
    if (route.def.method !== method) continue;
    const m = route.pattern.exec(path);
    if (!m) continue;
    const params: Record<string, string> = {};
    try {
      route.names.forEach((n, i) => {
        params[n] = decodeURIComponent(m[i + 1]!);
      });
    } catch {
      return undefined;
    }
    return { route, params };
  }
  return undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The body as API Gateway hands it to Lambda: text when it is UTF-8, else base64 with `isBase64Encoded`
 * (the handler refuses it then, after authentication, instead of reading replacement characters).
 */
function eventBody(body: Buffer): { body: string | null; isBase64Encoded: boolean } {
  if (!body.length) return { body: null, isBase64Encoded: false };
  try {
    return { body: utf8.decode(body), isBase64Encoded: false };
  } catch {
    return { body: body.toString('base64'), isBase64Encoded: true };
  }
}

/**
 * Build the API Gateway REST (v1) proxy event that Lambda would receive for this request. Header and
 * query names are the caller's: they are gathered in `Map`s, so `constructor` or `__proto__` is a name
 * like any other (the key rule is in functions/shared/validation.ts).
 */
export function toProxyEvent(
  req: IncomingMessage,
  url: URL,
  route: CompiledRoute,
  params: Record<string, string>,
  body: Buffer,
): APIGatewayProxyEvent {
  const headers = new Map<string, string>();
  const multiValueHeaders = new Map<string, string[]>();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i]!;
    const v = req.rawHeaders[i + 1]!;
    headers.set(k, v);
    const values = multiValueHeaders.get(k);
    if (values) values.push(v);
    else multiValueHeaders.set(k, [v]);
  }
  // API Gateway adds these to every proxy event (unless sent, under any case: `req.headers` has the
  // names lower-cased); locally the scheme is plain http.
  const forwarded: [string, string, string][] = [
    ['X-Forwarded-For', 'x-forwarded-for', req.socket.remoteAddress ?? '127.0.0.1'],
    ['X-Forwarded-Port', 'x-forwarded-port', String(req.socket.localPort ?? '')],
    ['X-Forwarded-Proto', 'x-forwarded-proto', 'http'],
  ];
  for (const [k, lower, v] of forwarded) {
    if (req.headers[lower] !== undefined) continue;
    headers.set(k, v);
    multiValueHeaders.set(k, [v]);
  }
  const query = new Map<string, string>();
  const multiQuery = new Map<string, string[]>();
  if (url.search)
    for (const [k, v] of url.searchParams) {
      query.set(k, v);
      const values = multiQuery.get(k);
      if (values) values.push(v);
      else multiQuery.set(k, [v]);
    }
  const host = req.headers.host;
  const hasQuery = query.size > 0;
  const requestId = randomUUID();
  return {
    resource: route.def.path,
    path: url.pathname,
    httpMethod: route.def.method,
    // Object.fromEntries defines own data properties: a `__proto__` name stays a name.
    headers: Object.fromEntries(headers),
    multiValueHeaders: Object.fromEntries(multiValueHeaders),
    queryStringParameters: hasQuery ? Object.fromEntries(query) : null,
    multiValueQueryStringParameters: hasQuery ? Object.fromEntries(multiQuery) : null,
    pathParameters: route.names.length ? params : null,
    stageVariables: null,
    ...eventBody(body),
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      authorizer: null,
      domainName: host && HOST_RE.test(host) ? host : 'localhost',
      httpMethod: route.def.method,
      identity: {
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: req.headers['user-agent'] ?? null,
      },
      path: url.pathname,
      protocol: `HTTP/${req.httpVersion}`,
      requestId,
      requestTimeEpoch: Date.now(),
      resourceId: route.id,
      resourcePath: route.def.path,
      stage: 'local',
    } as APIGatewayProxyEvent['requestContext'],
  };
}
