/**
 * What the AWS calls made without an SDK client (functions/shared/aws-json.ts for the JSON-protocol
 * services, functions/shared/s3-objects.ts, functions/ports/runtime/lambda-invoke.ts: see lib/cdk/README.md,
 * "Bundles") share with the SDK: the endpoint it would take from the environment and its standard retry
 * mode.
 */

/** The services called without an SDK client, as their `AWS_ENDPOINT_URL_<SERVICE>` variable names them. */
export type ConfiguredService =
  | 'S3'
  | 'LAMBDA'
  | 'DYNAMODB'
  | 'SFN'
  | 'SECRETS_MANAGER'
  | 'CLOUDWATCH_LOGS'
  | 'CODEBUILD'
  | 'ECR';

/**
 * The endpoint the SDK would use for `service` from the environment: `AWS_ENDPOINT_URL_<SERVICE>`, else
 * `AWS_ENDPOINT_URL`, neither when `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`. Undefined: AWS's own.
 */
export function configuredEndpoint(service: ConfiguredService, env: NodeJS.ProcessEnv = process.env) {
  if (env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS?.toLowerCase() === 'true') return undefined;
  return env[`AWS_ENDPOINT_URL_${service}`] || env.AWS_ENDPOINT_URL || undefined;
}

/** Attempts per call in the SDK's standard retry mode. */
export const STANDARD_ATTEMPTS = 3;

/** The delay before retry `n` (1 for the second attempt): jittered, up to 100 ms × 2^n, at most 20 s. */
export const standardBackoff = (n: number): number => Math.random() * Math.min(20_000, 100 * 2 ** n);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface RetryOptions {
  attempts?: number;
  /** Delay before retry `n` (default `standardBackoff`). */
  backoffMs?: (n: number) => number;
  /** How to wait (tests record or skip the waits). */
  sleep?: (ms: number) => Promise<void>;
}

/** `attempt()`, tried again while it throws what `retryable` accepts, `attempts` times in all. */
export async function withRetries<T>(
  attempt: () => Promise<T>,
  retryable: (err: unknown) => boolean,
  opts: RetryOptions = {},
): Promise<T> {
  const attempts = opts.attempts ?? STANDARD_ATTEMPTS;
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (n >= attempts || !retryable(err)) throw err;
      await (opts.sleep ?? sleep)((opts.backoffMs ?? standardBackoff)(n));
    }
  }
}
