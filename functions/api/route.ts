import '../shared/polyfills.js';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type * as z from 'zod/mini';
import { type RouteDef, type RouteId, routes } from '../manifest/routes.js';
import { authn } from './middleware/authn.js';
import { errorHandler } from './middleware/error-handler.js';
import { fairShare } from './middleware/fair-share.js';
import { jsonBody } from './middleware/json-body.js';
import { json } from './middleware/reply.js';
import type { State } from './middleware/request.js';
import { requestLog } from './middleware/request-log.js';
import { type Input, takeInput, validate } from './middleware/validate.js';

export { MAX_JSON_DEPTH } from './middleware/json-body.js';

/**
 * What a handler receives: validated input and the authenticated principal (each field described by
 * middleware/validate.ts `Input`), with body, path and query typed by the route's schemas.
 */
export type RouteRequest<B, P, Q> = Omit<Input, 'body' | 'params' | 'query'> & {
  body: B;
  params: P;
  query: Q;
};
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

/** The schemas each loaded route validates with, by route (what lib/openapi.ts describes). */
export const routeSchemas = new Map<RouteId, Schemas<z.core.$ZodType, z.core.$ZodType, z.core.$ZodType>>();

/**
 * Wrap a route's use-case function in the one middleware stack (one file each in middleware/), in a
 * fixed order: log → error handler → authenticate → fair share → body (size cap, JSON) → validate → `main`.
 * Authentication reads only headers, so a caller without credentials gets 401 whatever the body is.
 * Returns `main` too, so tests can call the raw function.
 */
export function route<B extends z.core.$ZodType, P extends z.core.$ZodType, Q extends z.core.$ZodType>(
  routeId: RouteId,
  schemas: Schemas<B, P, Q>,
  main: (req: RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>) => Promise<Reply>,
) {
  routeSchemas.set(routeId, schemas);
  const def = routes[routeId] as RouteDef;
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult, Error, Context, State>()
    .use(requestLog(routeId))
    .use(errorHandler())
    .use(authn({ kind: def.auth, webhookSecret: schemas.webhookSecret }))
    .use(fairShare())
    .use(
      jsonBody({
        maxBodyBytes: def.maxBodyBytes,
        takesBody: schemas.body !== undefined,
        required: schemas.bodyRequired,
      }),
    )
    .use(validate(schemas))
    .handler(async (event) => {
      const reply = await main(takeInput(event) as RouteRequest<z.infer<B>, z.infer<P>, z.infer<Q>>);
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
