import type { Context } from 'aws-lambda';

const noop = (): undefined => undefined;

/**
 * A Lambda context for a local invocation (API Gateway's 29 s integration limit as the deadline). A class,
 * so the local server's per-request context allocates one object and no closures.
 */
class LocalContext implements Context {
  readonly callbackWaitsForEmptyEventLoop = false;
  readonly functionVersion = '$LATEST';
  readonly memoryLimitInMB = '256';
  readonly logStreamName = 'local';
  readonly done = noop;
  readonly fail = noop;
  readonly succeed = noop;
  private readonly deadline: number;

  constructor(
    readonly functionName: string,
    readonly awsRequestId: string,
    timeoutMs: number,
  ) {
    this.deadline = Date.now() + timeoutMs;
  }
  get invokedFunctionArn(): string {
    return `arn:aws:lambda:local:000000000000:function:${this.functionName}`;
  }
  get logGroupName(): string {
    return `/local/${this.functionName}`;
  }
  getRemainingTimeInMillis(): number {
    return Math.max(0, this.deadline - Date.now());
  }
}

/** A Lambda context for a local invocation (API Gateway's 29 s integration limit as the deadline). */
export function lambdaContext(functionName: string, requestId: string, timeoutMs = 29_000): Context {
  return new LocalContext(functionName, requestId, timeoutMs);
}
