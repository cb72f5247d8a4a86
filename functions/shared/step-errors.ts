/*
 * Error names the state machines act on (Step Functions matches `ErrorEquals` against the thrown error's
 * name, or the `error` of SendTaskFailure): `Superseded` ends an execution quietly, `TransientError` is
 * retried with backoff, anything else is caught and recorded as `failed` with its message. Shared by the
 * steps and the runtimes (which refuse work of an older generation with `Superseded`).
 */

import { ServiceUnavailableError } from './errors.js';

/** A newer request owns the environment; this execution must change nothing. */
export class Superseded extends Error {
  override name = 'Superseded';
}
/**
 * A fault worth retrying (throttling, a flaky network call, a source host answering 5xx). A state machine
 * retries it; should one reach an API caller, it is a 503 with its message (a ServiceUnavailableError).
 */
export class TransientError extends ServiceUnavailableError {
  override name = 'TransientError';
}
/** A permanent failure whose message is shown to callers as the environment's `error`. */
export class DeployFailed extends Error {
  override name = 'DeployFailed';
}

/** The names above: the only custom names the ASL Retry/Catch lists may match (test/unit/architecture). */
export const STEP_ERROR_NAMES: readonly string[] = ['Superseded', 'TransientError', 'DeployFailed'];
