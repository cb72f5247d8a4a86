import { isServerError, isThrottlingError, isTransientError } from '@smithy/core/retry';
import { TransientError } from '../step-errors.js';

/*
 * The one place an AWS SDK error is judged. The SDK v3 names a service error by its code
 * (`ConditionalCheckFailedException`, `ResourceNotFoundException`…) and classifies it for its own retry
 * mode (@smithy/core/retry); adapters ask here instead of comparing names or status codes themselves, and
 * turn what is worth another try (after the SDK's own attempts) into the TransientError the state machines
 * retry and an API caller sees as a 503.
 */

/** Whether `err` is an error the service answered with one of `codes` (its `name`, as the SDK names them). */
export function isAwsError(err: unknown, ...codes: string[]): boolean {
  const name = (err as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && codes.includes(name);
}

/** The HTTP status the service answered with (undefined: no answer). */
export function awsStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/**
 * Whether a call that failed with `err` may succeed later: throttling, a transient or server error as the
 * SDK classifies them (the retry mode already tried it), or no answer at all (a network failure).
 */
export function isRetryableAwsError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e = err as Error & Parameters<typeof isThrottlingError>[0];
  if (isThrottlingError(e) || isTransientError(e) || isServerError(e)) return true;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}

const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN']);

/**
 * `err` as callers see it: a TransientError saying `what` failed and why when it may succeed later, `err`
 * itself otherwise (for the caller's own mapping or a 500 whose details stay in the log).
 */
export function asTransient(err: unknown, what: string): unknown {
  if (!isRetryableAwsError(err)) return err;
  const e = err as Error;
  return new TransientError(`${what}: ${e.name}${e.message ? ` (${e.message})` : ''}`, { cause: err });
}
