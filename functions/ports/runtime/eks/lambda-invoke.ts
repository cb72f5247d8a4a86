/**
 * The rollout watcher's one Lambda call: an asynchronous `Invoke` (`InvocationType: Event`) through
 * `@aws-sdk/client-lambda` (eks/rollout-watch.ts starts the watcher, and the watcher starts itself
 * again). Lambda queues the event and answers 202. The client is the container's (registry/
 * aws-clients.ts `lambdaClient()`): its standard retry mode retries throttling, server and network
 * errors; what still fails throws `LambdaInvokeError` with Lambda's error type
 * (`ResourceNotFoundException`, `AccessDeniedException`, …), judged by shared/aws/aws-errors.ts.
 */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { awsStatus, isRetryableAwsError } from '../../../shared/aws/aws-errors.js';

/** A failed `Invoke`: Lambda's error type as `name` (`Error` for a network failure), its HTTP status. */
export class LambdaInvokeError extends Error {
  constructor(
    override readonly name: string,
    message: string,
    /** 0: no answer (network). */
    readonly status: number,
    /** Worth another attempt later (throttled, a server error, no answer), after the SDK's own. */
    readonly retryable: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Asynchronous invocations of Lambda functions, by name or ARN. */
export class LambdaInvoker {
  constructor(private readonly lambda: LambdaClient) {}

  /** Queue an invocation of `fn` with `payload` (as JSON); resolves once Lambda answered 202. */
  async invokeAsync(fn: string, payload: unknown): Promise<void> {
    let status: number | undefined;
    try {
      const out = await this.lambda.send(
        new InvokeCommand({
          FunctionName: fn,
          InvocationType: 'Event',
          Payload: Buffer.from(JSON.stringify(payload), 'utf8'),
        }),
      );
      status = out.StatusCode;
    } catch (err) {
      const e = err as Error;
      throw new LambdaInvokeError(
        e?.name ?? 'Error',
        e?.message ?? String(err),
        awsStatus(err) ?? 0,
        isRetryableAwsError(err),
        { cause: err },
      );
    }
    if (status !== 202)
      throw new LambdaInvokeError(
        'UnexpectedStatus',
        `Lambda answered ${status} to an asynchronous invoke`,
        status ?? 0,
        false,
      );
  }
}
