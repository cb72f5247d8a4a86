import '../shared/polyfills.js';
import middy from '@middy/core';
import httpJsonBodyParser from '@middy/http-json-body-parser';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type * as z from 'zod';
import { authenticate, type Principal } from '../core/auth.js';
import { type RouteId, routes } from '../manifest/routes.js';
import { ConfigError, publicMessage, statusOf, ValidationError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { describeIssues } from '../shared/validation.js';

/** What a handler receives: validated input and the authenticated principal. */
export interface RouteRequest<B, P, Q> {
  body: B;
  params: P;
  query: Q;
  principal: Principal;
  requestId: string;
  /** Public base URL of the API as the caller reached it (for addresses in responses). */
  baseUrl: string;
  /** The body exactly as sent (for rules about how a value was written, not just its value). */
  rawBody: string | undefined;
}
/** What a handler returns: a status and a JSON-serializable body. */
export interface Reply {
  statusCode: number;
  body: unknown;
}

interface Schemas<B extends z.ZodType, P extends z.ZodType, Q extends z.ZodType> {
  /** Body schema; without one the body is ignored. */
  body?: B;
  /** A missing or empty body is a 400 (otherwise `undefined` is validated by `body`). */
  bodyRequired?: boolean;
  params?: P;
  query?: Q;
}

type Request = middy.Request<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>;
interface State extends Record<string, unknown> {
  started: number;
  body?: unknown;
  principal?: Principal;
}

export const json = (statusCode: number, body: unknown): APIGatewayProxyResult => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

/** Lower-cases header names (API Gateway passes them as the client sent them). */
function headersOf(event: APIGatewayProxyEvent): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) if (v !== undefined) out[k.toLowerCase()] = v;
  return out;
}

function baseUrlOf(event: APIGatewayProxyEvent, headers: Record<string, string>): string {
  const host = headers.host ?? event.requestContext?.domainName ?? 'localhost';
  const proto = headers['x-forwarded-proto'] ?? 'https';
  // The default execute-api host carries the stage as the first path segment; custom domains do not.
  const stage =
    host.includes('.execute-api.') && event.requestContext?.stage ? `/${event.requestContext.stage}` : '';
  return `${proto}://${host}${stage}`;
}

/** Validated input of each in-flight request, keyed by its event object. */
const inputs = new WeakMap<APIGatewayProxyEvent, RouteRequest<unknown, unknown, unknown>>();

function parse<T extends z.ZodType>(schema: T | undefined, value: unknown, where: string): z.infer<T> {
  if (!schema) return value as z.infer<T>;
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(describeIssues(where, result.error));
  return result.data;
}

/** 1. Log one line per request (route, status, latency, request id, org), never a body or header value. */
const requestLog = (routeId: RouteId): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => {
  const line = (request: Request) =>
    log.info('request', {
      route: routeId,
      method: routes[routeId].method,
      path: routes[routeId].path,
      status: request.response?.statusCode,
      latencyMs: Math.round((performance.now() - request.internal.started) * 10) / 10,
      requestId: request.context.awsRequestId,
      orgId: request.internal.principal?.orgId,
      error: request.error && statusOf(request.error) === 500 ? request.error.name : undefined,
    });
  return {
    before: (request) => {
      (request as Request).internal.started = performance.now();
    },
    after: (request) => line(request as Request),
    onError: (request) => line(request as Request),
  };
};

/** 2. Map any error to `{ "error": "..." }` with its status; unexpected errors become a generic 500. */
const errorHandler = (): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  onError: (request) => {
    const status = statusOf(request.error);
    if (status === 500) {
      // Name and stack only: messages of unexpected errors are not trusted to be free of secret values.
      // A ConfigError's message is ours and names the bad variables: operators need it.
      log.error('unhandled error', {
        requestId: request.context.awsRequestId,
        name: request.error?.name,
        detail: request.error instanceof ConfigError ? request.error.message : undefined,
        stack: request.error?.stack?.split('\n').slice(1, 6).join(' | '),
      });
    }
    request.response = json(status, { error: publicMessage(request.error) });
  },
});

/** Whether a parsed JSON value has an own `__proto__` member anywhere (a prototype-pollution payload). */
function hasProtoMember(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (!Array.isArray(value) && Object.hasOwn(value, '__proto__')) return true;
  return Object.values(value).some(hasProtoMember);
}

/** 3. Parse the JSON body (any content type: this API speaks only JSON); malformed JSON is a 400. */
const jsonBody = (
  required: boolean,
  wanted: boolean,
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => {
  // `disableContentTypeCheck` is a runtime option the package's type declarations do not list.
  const parser = httpJsonBodyParser({ disableContentTypeCheck: true } as Parameters<
    typeof httpJsonBodyParser
  >[0]);
  return {
    before: async (request) => {
      const raw = request.event.body;
      const empty = raw === null || raw === undefined || raw.trim() === '';
      if (!wanted) return;
      if (empty) {
        if (required) throw new ValidationError('request body is required');
        (request as Request).internal.body = undefined;
        return;
      }
      // Parse a copy: the event keeps the raw text for `rawBody`.
      const copy = { ...request.event };
      try {
        await parser.before?.({ ...request, event: copy } as never);
      } catch {
        throw new ValidationError('request body is not valid JSON');
      }
      if (hasProtoMember(copy.body))
        throw new ValidationError('request body must not contain __proto__ members');
      (request as Request).internal.body = copy.body as unknown;
    },
  };
};

/** 4. Authenticate with the route's credential kind; 401 when missing or wrong. */
const authn = (routeId: RouteId): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  before: async (request) => {
    (request as Request).internal.principal = await authenticate(
      routes[routeId].auth,
      headersOf(request.event),
    );
  },
});

/** 5. Validate path, query and body with the route's zod schemas. */
const validate = <B extends z.ZodType, P extends z.ZodType, Q extends z.ZodType>(
  schemas: Schemas<B, P, Q>,
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  before: (request) => {
    const r = request as Request;
    const event = request.event;
    const headers = headersOf(event);
    inputs.set(event, {
      params: parse(schemas.params, event.pathParameters ?? {}, 'path'),
      query: parse(schemas.query, event.queryStringParameters ?? {}, 'query'),
      body: parse(schemas.body, r.internal.body, 'request body'),
      principal: r.internal.principal!,
      requestId: request.context.awsRequestId,
      baseUrl: baseUrlOf(event, headers),
      rawBody:
        event.body && event.isBase64Encoded
          ? Buffer.from(event.body, 'base64').toString('utf8')
          : (event.body ?? undefined),
    });
  },
});

/**
 * Wrap a route's use-case function in the one middleware stack, in a fixed order:
 * log → error handler → JSON body → authenticate → validate → `main`.
 * Returns `main` too, so tests can call the raw function.
 */
export function route<B extends z.ZodType, P extends z.ZodType, Q extends z.ZodType>(
  routeId: RouteId,
  schemas: Schemas<B, P, Q>,
  main: (req: RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>) => Promise<Reply>,
) {
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>()
    .use(requestLog(routeId))
    .use(errorHandler())
    .use(jsonBody(schemas.bodyRequired ?? false, schemas.body !== undefined))
    .use(authn(routeId))
    .use(validate(schemas))
    .handler(async (event) => {
      const input = inputs.get(event) as RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>;
      inputs.delete(event);
      const reply = await main(input);
      return json(reply.statusCode, reply.body);
    });
  return { main, handler };
}
