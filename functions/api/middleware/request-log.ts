import { type RouteId, routes } from '../../manifest/routes.js';
import { statusOf } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import type { Middleware, Request } from './request.js';

/**
 * Logs one line per request, answered or failed: route, method, path, status, latency, request id and
 * organization, and the error's name when it became a 500. Never a body or a header value. First in the
 * chain, so its clock starts before any other middleware and its line is written after all of them.
 */
export const requestLog = (routeId: RouteId): Middleware => {
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
      request.internal.started = performance.now();
    },
    after: line,
    onError: line,
  };
};
