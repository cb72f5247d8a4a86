/**
 * Typed errors. Every error a caller may see is one of these; the HTTP error handler maps them to status
 * codes with `instanceof` in one place (`statusOf`). Messages are written for the caller and must never
 * contain secret values. Anything else becomes a generic 500 whose details stay in the log.
 */
export abstract class AppError extends Error {
  abstract readonly statusCode: number;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** 400: the request is malformed or breaks a rule of the contract. */
export class ValidationError extends AppError {
  readonly statusCode = 400;
}
/** 401: credentials are missing or wrong. */
export class UnauthorizedError extends AppError {
  readonly statusCode = 401;
  constructor(message = 'missing or invalid credentials') {
    super(message);
  }
}
/** 404: the object does not exist, or belongs to another organization (never 403). */
export class NotFoundError extends AppError {
  readonly statusCode = 404;
}
/** 409: the object exists but is in a state that forbids the operation. */
export class ConflictError extends AppError {
  readonly statusCode = 409;
}
/** 409: the object to create exists already; `existingId` names it (callers get it in the answer). */
export class AlreadyExistsError extends ConflictError {
  constructor(
    message: string,
    readonly existingId: string,
  ) {
    super(message);
  }
}
/** 413: the request body is larger than the service accepts. */
export class PayloadTooLargeError extends AppError {
  readonly statusCode = 413;
}

/**
 * 429: the caller's organization used its fair share (core/fair-share.ts); `retryAfterSeconds` becomes the
 * `Retry-After` header.
 */
export class TooManyRequestsError extends AppError {
  readonly statusCode = 429;
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/**
 * 503: a capability this deployment does not provide (an adapter that is not configured or not built).
 * The message says which, so an operator can act on it.
 */
export class ServiceUnavailableError extends AppError {
  readonly statusCode = 503;
}

/** Configuration is missing or invalid: raised at cold start, never mapped to a 4xx. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Raised for an event its handler cannot read (a service-bus rule's target, the image-build target, the
 * rollout watcher): it fails the invocation, so the event reaches the function's on-failure destination
 * (locally the dead-letter file, at once: the local bus knows this name and does not retry it). Never
 * mapped to a status: no API caller sees it.
 */
export class MalformedEvent extends Error {
  override name = 'MalformedEvent';
}

/** Status code for any thrown value: the one place errors are mapped. */
export function statusOf(err: unknown): number {
  return err instanceof AppError ? err.statusCode : 500;
}

/** Message safe to show a caller: the AppError's own, or a generic one for anything unexpected. */
export function publicMessage(err: unknown): string {
  return err instanceof AppError ? err.message : 'internal error';
}
