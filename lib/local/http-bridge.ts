import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import type { RouteDef } from '../../functions/manifest/routes.js';

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

/** Build the API Gateway REST (v1) proxy event that Lambda would receive for this request. */
export function toProxyEvent(
  req: IncomingMessage,
  url: URL,
  route: CompiledRoute,
  params: Record<string, string>,
  body: Buffer,
): APIGatewayProxyEvent {
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i]!;
    const v = req.rawHeaders[i + 1]!;
    headers[k] = v;
    multiValueHeaders[k] = [...(multiValueHeaders[k] ?? []), v];
  }
  // API Gateway adds these to every proxy event; locally the scheme is plain http.
  const forwarded: Record<string, string> = {
    'X-Forwarded-For': req.socket.remoteAddress ?? '127.0.0.1',
    'X-Forwarded-Port': String(req.socket.localPort ?? ''),
    'X-Forwarded-Proto': 'http',
  };
  for (const [k, v] of Object.entries(forwarded)) {
    if (Object.keys(headers).some((h) => h.toLowerCase() === k.toLowerCase())) continue;
    headers[k] = v;
    multiValueHeaders[k] = [v];
  }
  const query: Record<string, string> = {};
  const multiQuery: Record<string, string[]> = {};
  for (const [k, v] of url.searchParams) {
    query[k] = v;
    multiQuery[k] = [...(multiQuery[k] ?? []), v];
  }
  const hasQuery = Object.keys(query).length > 0;
  const requestId = randomUUID();
  return {
    resource: route.def.path,
    path: url.pathname,
    httpMethod: route.def.method,
    headers,
    multiValueHeaders,
    queryStringParameters: hasQuery ? query : null,
    multiValueQueryStringParameters: hasQuery ? multiQuery : null,
    pathParameters: route.names.length ? params : null,
    stageVariables: null,
    body: body.length ? body.toString('utf8') : null,
    isBase64Encoded: false,
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      authorizer: null,
      domainName: req.headers.host ?? 'localhost',
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
