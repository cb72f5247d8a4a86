/**
 * One Lambda API call, asynchronous `Invoke` (`InvocationType: Event`), without `@aws-sdk/client-lambda`:
 * the rollout watcher's only Lambda call (eks.ts starts it, and it starts itself again). The SDK client
 * costs each bundle that makes it about 70 KB minified (its schemas register every error class of the
 * Lambda API, so it does not tree-shake); this is the same request, signed with the SDK's own SigV4 signer
 * and sent with its Node.js HTTP handler, both already in every bundle (lib/cdk/README.md, "Bundles").
 *
 * The request: `POST /2015-03-31/functions/{name}/invocations` with `X-Amz-Invocation-Type: Event` and the
 * event as JSON; Lambda queues it and answers 202. Endpoint: `AWS_ENDPOINT_URL_LAMBDA`, else
 * `AWS_ENDPOINT_URL`, else the regional `https://lambda.<region>.amazonaws.com` (as the SDK resolves it).
 * Retried like the SDK's standard mode (3 attempts, jittered exponential backoff) on throttling (429),
 * server errors (5xx) and network errors; anything else, or the last failure, throws `LambdaInvokeError`
 * with Lambda's error type (`ResourceNotFoundException`, `AccessDeniedException`, …).
 */
import type { Readable } from 'node:stream';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { SignatureV4 } from '@smithy/signature-v4';
import { configuredEndpoint, STANDARD_ATTEMPTS, withRetries } from '../../shared/aws-http.js';
import { NodeSha256 } from '../../shared/sha256.js';
import type { CredentialProvider } from './eks-auth.js';

/** The Lambda API version in every Invoke path. */
const API_VERSION = '2015-03-31';
export const INVOKE_ATTEMPTS = STANDARD_ATTEMPTS;

/** A failed `Invoke`: Lambda's error type as `name` (`Error` for a network failure), its HTTP status. */
export class LambdaInvokeError extends Error {
  constructor(
    override readonly name: string,
    message: string,
    /** 0: no answer (network). */
    readonly status: number,
    /** Worth another attempt (throttled, a server error, no answer). */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface LambdaInvokerOptions {
  region: string;
  credentials: CredentialProvider;
  /** Default: `AWS_ENDPOINT_URL_LAMBDA`, `AWS_ENDPOINT_URL`, else the regional endpoint. */
  endpoint?: string;
  /** Send one request (default: the SDK's NodeHttpHandler). Tests observe what is sent here. */
  handler?: Pick<NodeHttpHandler, 'handle'>;
  /** Delay before retry `n` (default: the SDK's standard backoff, functions/shared/aws-http.ts). */
  backoffMs?: (n: number) => number;
  /** Fixed signing time (tests). */
  signingDate?: () => Date;
}

type Request = Parameters<NodeHttpHandler['handle']>[0];

/** The Lambda endpoint the SDK would use: `AWS_ENDPOINT_URL_LAMBDA`, `AWS_ENDPOINT_URL`, or regional. */
export function lambdaEndpoint(region: string, env: NodeJS.ProcessEnv = process.env): string {
  const configured = configuredEndpoint('LAMBDA', env);
  if (configured) return configured;
  return `https://lambda.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

/** Asynchronous invocations of Lambda functions, by name or ARN; one per process is enough. */
export class LambdaInvoker {
  private readonly signer: SignatureV4;
  private readonly handler: Pick<NodeHttpHandler, 'handle'>;
  private readonly endpoint: URL;

  constructor(private readonly opts: LambdaInvokerOptions) {
    this.signer = new SignatureV4({
      credentials: opts.credentials,
      region: opts.region,
      service: 'lambda',
      sha256: NodeSha256,
    });
    this.handler = opts.handler ?? new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: 30_000 });
    this.endpoint = new URL(opts.endpoint ?? lambdaEndpoint(opts.region));
  }

  /** The signed request of an asynchronous `Invoke` of `fn` with `payload` (as JSON). */
  async request(fn: string, payload: unknown): Promise<Request> {
    const body = JSON.stringify(payload);
    const base = this.endpoint.pathname.replace(/\/+$/, '');
    const unsigned = {
      method: 'POST',
      protocol: this.endpoint.protocol,
      hostname: this.endpoint.hostname,
      ...(this.endpoint.port ? { port: Number(this.endpoint.port) } : {}),
      path: `${base}/${API_VERSION}/functions/${encodeURIComponent(fn)}/invocations`,
      query: {},
      headers: {
        host: this.endpoint.host,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'x-amz-invocation-type': 'Event',
      },
      body,
    };
    const signed = await this.signer.sign(unsigned as unknown as Request, {
      ...(this.opts.signingDate ? { signingDate: this.opts.signingDate() } : {}),
    });
    return signed as Request;
  }

  /** Queue an invocation of `fn` with `payload`; resolves once Lambda answered 202 (throws otherwise). */
  invokeAsync(fn: string, payload: unknown): Promise<void> {
    return withRetries(
      () => this.once(fn, payload).catch((err) => Promise.reject(asInvokeError(err))),
      (err) => (err as LambdaInvokeError).retryable,
      { attempts: INVOKE_ATTEMPTS, ...(this.opts.backoffMs ? { backoffMs: this.opts.backoffMs } : {}) },
    );
  }

  private async once(fn: string, payload: unknown): Promise<void> {
    const { response } = await this.handler.handle(await this.request(fn, payload));
    const text = await readBody(response.body as Readable | undefined);
    if (response.statusCode === 202) return;
    const header = (name: string) => {
      const found = Object.entries(response.headers).find(([k]) => k.toLowerCase() === name);
      return found?.[1];
    };
    let parsed: { message?: string; Message?: string; Type?: string; __type?: string } = {};
    try {
      parsed = JSON.parse(text || '{}');
    } catch {
      parsed = {};
    }
    const type = (header('x-amzn-errortype') ?? parsed.__type ?? parsed.Type ?? '').split(':')[0]!;
    const status = response.statusCode;
    const retryable = status === 429 || status >= 500 || type === 'TooManyRequestsException';
    const message = parsed.message ?? parsed.Message ?? (text.slice(0, 200) || `HTTP ${status}`);
    if (status >= 200 && status < 300)
      throw new LambdaInvokeError(
        'UnexpectedStatus',
        `Lambda answered ${status} to an asynchronous invoke`,
        status,
        false,
      );
    throw new LambdaInvokeError(type || `Http${status}`, message, status, retryable);
  }
}

function asInvokeError(err: unknown): LambdaInvokeError {
  if (err instanceof LambdaInvokeError) return err;
  const e = err as Error;
  // No answer (refused, reset, timed out): the SDK retries those too. Credential errors are not retried.
  const network = e?.name !== 'CredentialsProviderError';
  return new LambdaInvokeError(e?.name ?? 'Error', e?.message ?? String(err), 0, network);
}

async function readBody(body: Readable | undefined): Promise<string> {
  if (!body || typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function') return '';
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks).toString('utf8');
}
