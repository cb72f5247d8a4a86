import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { Principal } from '../../core/auth/index.js';

/** What the middlewares of the chain hand down to the next ones, on middy's `request.internal`. */
export interface State extends Record<string, unknown> {
  /** When the request came in (`performance.now()`), for the request log's latency. */
  started: number;
  /** The parsed JSON body, once `jsonBody` has read it. */
  body?: unknown;
  /** The body as text (UTF-8 decoded), once `jsonBody` has read it. */
  rawBody?: string;
  principal?: Principal;
  /** The request headers, names lower-cased (`headersOf`), read once by `authn` for the whole chain. */
  headers?: Record<string, string>;
}

/** A request as every middleware of the chain sees it. */
export type Request = middy.Request<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>;

/** A middleware of the chain: middy's `{ before, after, onError }`, any of them. */
export type Middleware = middy.MiddlewareObj<
  APIGatewayProxyEvent,
  APIGatewayProxyResult,
  Error,
  Context,
  State
>;

/**
 * Lower-cases header names (API Gateway passes them as the client sent them). A null-prototype object:
 * a header named `constructor` or `__proto__` is data, and a lookup never finds an inherited member.
 */
export function headersOf(event: APIGatewayProxyEvent): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(event.headers ?? {}))
    if (typeof v === 'string') out[k.toLowerCase()] = v;
  return out;
}
