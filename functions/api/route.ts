import '../shared/polyfills.js';
import middy from '@middy/core';
import httpJsonBodyParser from '@middy/http-json-body-parser';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import * as z from 'zod/mini';
import { takeRequest } from '../core/applications/index.js';
import { authenticate, type Principal } from '../core/auth/index.js';
import { DEFAULT_MAX_BODY_BYTES, type RouteDef, type RouteId, routes } from '../manifest/routes.js';
import {
  AlreadyExistsError,
  ConfigError,
  PayloadTooLargeError,
  publicMessage,
  statusOf,
  TooManyRequestsError,
  ValidationError,
} from '../shared/errors.js';
import { log } from '../shared/log.js';
import {
  describeIssues,
  HOST_RE,
  isReservedKey,
  RESERVED_KEY,
  reservedMemberPath,
} from '../shared/validation.js';
import { stagePath } from './stage.js';

/** Deepest nesting of arrays and objects a JSON body may have (400 beyond it, before it is parsed). */
export const MAX_JSON_DEPTH = 64;

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
  /** The request headers, names lower-cased (a null-prototype object). */
  headers: Record<string, string>;
}
/** What a handler returns: a status and a JSON-serializable body. */
export interface Reply {
  statusCode: number;
  body: unknown;
  /** Send `body` (a string) as is, with this content type, instead of as JSON (errors stay JSON). */
  contentType?: string;
  /** Extra response headers (e.g. `Link` on GET /run). */
  headers?: Record<string, string>;
}

interface Schemas<B extends z.core.$ZodType, P extends z.core.$ZodType, Q extends z.core.$ZodType> {
  /** Body schema; without one the body is ignored. */
  body?: B;
  /** A missing or empty body is a 400 (otherwise `undefined` is validated by `body`). */
  bodyRequired?: boolean;
  params?: P;
  query?: Q;
  /** `githubWebhook` routes: the webhook secret the signature is checked against. */
  webhookSecret?: () => Promise<string>;
}

type Request = middy.Request<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>;
interface State extends Record<string, unknown> {
  started: number;
  body?: unknown;
  /** The body as text (UTF-8 decoded), once `jsonBody` has read it. */
  rawBody?: string;
  principal?: Principal;
  /** The request headers, names lower-cased (`headersOf`), read once by `authn` for the whole stack. */
  headers?: Record<string, string>;
}

export const json = (statusCode: number, body: unknown): APIGatewayProxyResult => ({
  statusCode,
  headers: { 'content-type': 'application/json' },
  // A trailing newline, so a body printed by curl does not run into the shell prompt.
  body: `${JSON.stringify(body)}\n`,
});

/**
 * Lower-cases header names (API Gateway passes them as the client sent them). A null-prototype object:
 * a header named `constructor` or `__proto__` is data, and a lookup never finds an inherited member.
 */
function headersOf(event: APIGatewayProxyEvent): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(event.headers ?? {}))
    if (typeof v === 'string') out[k.toLowerCase()] = v;
  return out;
}

/**
 * A copy of path or query parameters as a null-prototype object (a query key `constructor` is data),
 * without `__proto__` (a name no schema has; see shared/validation.ts).
 */
function paramsOf(values: Record<string, string | undefined> | null | undefined): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(values ?? {}))
    if (typeof v === 'string' && !isReservedKey(k)) out[k] = v;
  return out;
}

/**
 * Public base URL of the API as the caller reached it. A `Host` that is not a host name or address
 * (`a b`, `[::`, empty) is a 400.
 */
function baseUrlOf(event: APIGatewayProxyEvent, headers: Record<string, string>): string {
  const sent = headers.host?.trim();
  if (sent !== undefined && !HOST_RE.test(sent)) throw new ValidationError('malformed Host header');
  const domain = event.requestContext?.domainName;
  const host = sent || (domain && HOST_RE.test(domain) ? domain : 'localhost');
  const forwarded = headers['x-forwarded-proto']?.trim().toLowerCase();
  const proto = forwarded === 'http' || forwarded === 'https' ? forwarded : 'https';
  return `${proto}://${host}${stagePath(event, host)}`;
}

/** Validated input of each in-flight request, keyed by its event object. */
const inputs = new WeakMap<APIGatewayProxyEvent, RouteRequest<unknown, unknown, unknown>>();

function parse<T extends z.core.$ZodType>(schema: T | undefined, value: unknown, where: string): z.infer<T> {
  if (!schema) return value as z.infer<T>;
  const result = z.safeParse(schema, value);
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
      orgId: request.internal.principal?.orgId || undefined,
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
    const existing = request.error instanceof AlreadyExistsError ? request.error.existingId : undefined;
    request.response = json(status, {
      error: publicMessage(request.error),
      ...(existing ? { existingId: existing } : {}),
    });
    if (request.error instanceof TooManyRequestsError)
      request.response.headers = {
        ...request.response.headers,
        'retry-after': String(request.error.retryAfterSeconds),
      };
  },
});

/**
 * 3. Authenticate with the route's credential kind; 401 when missing or wrong. Reads no body, but for a
 * `githubWebhook` route, whose signature covers the body: its bytes as received, before any parsing.
 */
const authn = (
  routeId: RouteId,
  webhookSecret?: () => Promise<string>,
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  before: async (request) => {
    const kind = routes[routeId].auth as RouteDef['auth'];
    const internal = (request as Request).internal;
    internal.headers = headersOf(request.event);
    internal.principal = await authenticate(
      kind,
      internal.headers,
      kind === 'githubWebhook' && webhookSecret
        ? { rawBody: rawBytesOf(request.event), secret: webhookSecret }
        : undefined,
    );
  },
});

/**
 * 3b. Count the request against its organization's fair share (core/fair-share.ts): 429 with
 * `Retry-After` past it. GitHub's webhooks act for no one organization and are not counted.
 */
const fairShare = (): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  before: async (request) => {
    const principal = (request as Request).internal.principal;
    if (principal?.orgId && !principal.githubWebhook) await takeRequest(principal.orgId);
  },
});

/** The body's bytes as received (API Gateway base64-encodes a body it does not pass as text). */
function rawBytesOf(event: APIGatewayProxyEvent): Buffer {
  const body = event.body ?? '';
  return event.isBase64Encoded ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
}

/**
 * Whether JSON text nests arrays and objects deeper than `max`: a linear scan of the text (strings
 * skipped), so a body 100,000 levels deep costs no stack and is refused before it is parsed.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character; a quote ends the string.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The size in bytes of the body as received, and its text (undefined when it is not valid UTF-8). */
function bodyOf(event: APIGatewayProxyEvent): { bytes: number; text: string | undefined } {
  const body = event.body;
  if (body === null || body === undefined) return { bytes: 0, text: undefined };
  if (!event.isBase64Encoded) return { bytes: Buffer.byteLength(body, 'utf8'), text: body };
  const raw = Buffer.from(body, 'base64');
  try {
    return { bytes: raw.length, text: utf8.decode(raw) };
  } catch {
    return { bytes: raw.length, text: undefined };
  }
}

const kb = (bytes: number) => (bytes % 1024 === 0 ? ` (${bytes / 1024} KB)` : '');

/**
 * 4. Read the body: 413 above the route's cap (`maxBodyBytes` of the manifest, measured on the body as
 * received), then, when the route takes a body, 400 for text that is not UTF-8, nests deeper than
 * {@link MAX_JSON_DEPTH}, is not JSON (any content type: this API speaks only JSON), or has a `__proto__`
 * member anywhere (a prototype-pollution payload).
 */
const jsonBody = (
  routeId: RouteId,
  required: boolean,
  wanted: boolean,
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => {
  const max = (routes[routeId] as RouteDef).maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  // The parse itself is @middy/http-json-body-parser's (`disableContentTypeCheck`: a runtime option its
  // type declarations do not list), on a copy of the event holding the decoded text.
  const parser = httpJsonBodyParser({ disableContentTypeCheck: true } as Parameters<
    typeof httpJsonBodyParser
  >[0]);
  const capped = (event: APIGatewayProxyEvent) => {
    const read = bodyOf(event);
    if (read.bytes > max)
      throw new PayloadTooLargeError(`request body is too large: at most ${max} bytes${kb(max)}`);
    return read;
  };
  // A route without a body schema only caps the body: synchronously (no promise per request).
  if (!wanted)
    return {
      before: (request) => {
        capped(request.event);
      },
    };
  return {
    before: async (request) => {
      const internal = (request as Request).internal;
      const { bytes, text } = capped(request.event);
      if (bytes > 0 && text === undefined) throw new ValidationError('request body is not valid UTF-8');
      internal.rawBody = text;
      if (text === undefined || text.trim() === '') {
        if (required) throw new ValidationError('request body is required');
        internal.body = undefined;
        return;
      }
      if (jsonDepthExceeds(text, MAX_JSON_DEPTH))
        throw new ValidationError(
          `request body is nested too deeply: at most ${MAX_JSON_DEPTH} levels of arrays and objects`,
        );
      const copy = { ...request.event, body: text, isBase64Encoded: false };
      try {
        await parser.before?.({ ...request, event: copy } as never);
      } catch {
        throw new ValidationError('request body is not valid JSON');
      }
      const parsed: unknown = copy.body;
      if (reservedMemberPath(parsed))
        throw new ValidationError(`request body must not contain ${RESERVED_KEY} members`);
      internal.body = parsed;
    },
  };
};

/** 5. Validate path, query and body with the route's zod schemas. */
const validate = <B extends z.core.$ZodType, P extends z.core.$ZodType, Q extends z.core.$ZodType>(
  schemas: Schemas<B, P, Q>,
): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> => ({
  before: (request) => {
    const r = request as Request;
    const event = request.event;
    const headers = r.internal.headers ?? headersOf(event);
    inputs.set(event, {
      params: parse(schemas.params, paramsOf(event.pathParameters), 'path'),
      query: parse(schemas.query, paramsOf(event.queryStringParameters), 'query'),
      body: parse(schemas.body, r.internal.body, 'request body'),
      principal: r.internal.principal!,
      requestId: request.context.awsRequestId,
      baseUrl: baseUrlOf(event, headers),
      rawBody: r.internal.rawBody,
      headers,
    });
  },
});

/**
 * Wrap a route's use-case function in the one middleware stack, in a fixed order:
 * log → error handler → authenticate → fair share → body (size cap, JSON) → validate → `main`.
 * Authentication reads only headers, so a caller without credentials gets 401 whatever the body is.
 * Returns `main` too, so tests can call the raw function.
 */
/** The schemas each loaded route validates with, by route (what lib/openapi.ts describes). */
export const routeSchemas = new Map<RouteId, Schemas<z.core.$ZodType, z.core.$ZodType, z.core.$ZodType>>();

export function route<B extends z.core.$ZodType, P extends z.core.$ZodType, Q extends z.core.$ZodType>(
  routeId: RouteId,
  schemas: Schemas<B, P, Q>,
  main: (req: RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>) => Promise<Reply>,
) {
  routeSchemas.set(routeId, schemas);
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>()
    .use(requestLog(routeId))
    .use(errorHandler())
    .use(authn(routeId, schemas.webhookSecret))
    .use(fairShare())
    .use(jsonBody(routeId, schemas.bodyRequired ?? false, schemas.body !== undefined))
    .use(validate(schemas))
    .handler(async (event) => {
      const input = inputs.get(event) as RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>;
      inputs.delete(event);
      const reply = await main(input);
      if (reply.contentType !== undefined && typeof reply.body === 'string')
        return {
          statusCode: reply.statusCode,
          headers: { 'content-type': reply.contentType },
          body: reply.body,
        };
      const out = json(reply.statusCode, reply.body);
      if (reply.headers) out.headers = { ...reply.headers, ...out.headers };
      return out;
    });
  return { main, handler };
}
