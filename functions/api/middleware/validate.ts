import type { APIGatewayProxyEvent } from 'aws-lambda';
import * as z from 'zod/mini';
import type { Principal } from '../../core/auth/index.js';
import { ValidationError } from '../../shared/errors.js';
import { describeIssues, HOST_RE, isReservedKey } from '../../shared/validation.js';
import { stagePath } from '../stage.js';
import { headersOf, type Middleware } from './request.js';

/** The zod schemas a route validates its input with; a part without one passes as it is. */
export interface InputSchemas {
  body?: z.core.$ZodType;
  params?: z.core.$ZodType;
  query?: z.core.$ZodType;
}

/** A request's validated input and the authenticated principal: what the route's handler receives. */
export interface Input {
  body: unknown;
  params: unknown;
  query: unknown;
  principal: Principal;
  requestId: string;
  /** Public base URL of the API as the caller reached it (for addresses in responses). */
  baseUrl: string;
  /** The body exactly as sent (for rules about how a value was written, not just its value). */
  rawBody: string | undefined;
  /** The request headers, names lower-cased (a null-prototype object). */
  headers: Record<string, string>;
}

/** Validated input of each in-flight request, keyed by its event object (middy hands a handler only the event). */
const inputs = new WeakMap<APIGatewayProxyEvent, Input>();

/**
 * Validates path, query and body (as `jsonBody` parsed it) with the route's zod schemas, 400 naming the
 * first bad field, and a malformed `Host` (400). The handler takes the result with {@link takeInput}.
 */
export const validate = (schemas: InputSchemas): Middleware => ({
  before: (request) => {
    const event = request.event;
    const headers = request.internal.headers ?? headersOf(event);
    inputs.set(event, {
      params: parse(schemas.params, paramsOf(event.pathParameters), 'path'),
      query: parse(schemas.query, paramsOf(event.queryStringParameters), 'query'),
      body: parse(schemas.body, request.internal.body, 'request body'),
      principal: request.internal.principal!,
      requestId: request.context.awsRequestId,
      baseUrl: baseUrlOf(event, headers),
      rawBody: request.internal.rawBody,
      headers,
    });
  },
});

/** The input `validate` left for this event, handed over once (undefined when it left none). */
export function takeInput(event: APIGatewayProxyEvent): Input | undefined {
  const input = inputs.get(event);
  inputs.delete(event);
  return input;
}

function parse(schema: z.core.$ZodType | undefined, value: unknown, where: string): unknown {
  if (!schema) return value;
  const result = z.safeParse(schema, value);
  if (!result.success) throw new ValidationError(describeIssues(where, result.error));
  return result.data;
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
