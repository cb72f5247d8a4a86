import {
  AlreadyExistsError,
  ConfigError,
  publicMessage,
  statusOf,
  TooManyRequestsError,
} from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { json } from './reply.js';
import type { Middleware } from './request.js';

/**
 * Maps any error to `{ "error": "..." }` with its status (`statusOf`): a 409 of an object that exists
 * names it (`existingId`), a 429 says when to come back (`Retry-After`). An unexpected error becomes a
 * generic 500, logged by name and stack only.
 */
export const errorHandler = (): Middleware => ({
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
