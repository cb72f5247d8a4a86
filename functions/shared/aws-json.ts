import type { Readable } from 'node:stream';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { type ConfiguredService, configuredEndpoint, type RetryOptions, withRetries } from './aws-http.js';
import { NodeSha256 } from './sha256.js';

/*
 * One client for every AWS service the Lambdas call that speaks the AWS JSON protocol (DynamoDB, Step
 * Functions, Secrets Manager, CloudWatch Logs, CodeBuild, ECR): `POST /` with `X-Amz-Target:
 * <prefix>.<Operation>` and the operation's input as the JSON body, the output as the JSON answer, an
 * error as `{ "__type": "...#Code", "message": "..." }`. The protocol is the same for all six, so one
 * small client (signed with the SDK's own @smithy/signature-v4, sent with its @smithy/node-http-handler)
 * replaces six SDK clients and the ~150 KB of middleware stack, schema serde and endpoint rule engine each
 * bundle carried with them (see lib/cdk/README.md, "Bundles", for the figures and docs/decisions.md for
 * the trade-off).
 *
 * What it keeps of the SDK's behaviour: the credentials (`@aws-sdk/credential-provider-node`'s default
 * chain unbundled, the environment in Lambda bundles: shared/lambda-credentials.ts), the region, a custom
 * endpoint from `AWS_ENDPOINT_URL_<SERVICE>` / `AWS_ENDPOINT_URL` (unless
 * `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), keep-alive connections, the standard retry mode (3
 * attempts, jittered exponential backoff) for network errors, 5xx, 429 and the SDK's throttling and
 * transient error codes, errors named by their code with the service's fields (`CancellationReasons`…)
 * and `$fault`/`$metadata` as the SDK sets them. Inputs and outputs are the wire JSON: timestamps arrive
 * as epoch seconds (numbers), blobs as base64 strings; callers that read one convert it.
 * What it does not do: shared config files, FIPS/dual-stack endpoints, non-`aws` partitions, the retry
 * token bucket, clock-skew correction, response CRC32 checks (the SDK v3 does not check them either).
 */

/** An AWS JSON-protocol service: how it is addressed, signed and targeted. */
export interface JsonService {
  /** The `AWS_ENDPOINT_URL_<id>` suffix the SDK reads for it. */
  id: ConfiguredService;
  /** First label of its regional host: `https://<endpointPrefix>.<region>.amazonaws.com`. */
  endpointPrefix: string;
  /** SigV4 service name. */
  signingName: string;
  /** `X-Amz-Target` prefix. */
  targetPrefix: string;
  /** `application/x-amz-json-<version>`. */
  version: '1.0' | '1.1';
}

export const DYNAMODB: JsonService = {
  id: 'DYNAMODB',
  endpointPrefix: 'dynamodb',
  signingName: 'dynamodb',
  targetPrefix: 'DynamoDB_20120810',
  version: '1.0',
};
export const SFN: JsonService = {
  id: 'SFN',
  endpointPrefix: 'states',
  signingName: 'states',
  targetPrefix: 'AWSStepFunctions',
  version: '1.0',
};
export const SECRETS_MANAGER: JsonService = {
  id: 'SECRETS_MANAGER',
  endpointPrefix: 'secretsmanager',
  signingName: 'secretsmanager',
  targetPrefix: 'secretsmanager',
  version: '1.1',
};
export const CLOUDWATCH_LOGS: JsonService = {
  id: 'CLOUDWATCH_LOGS',
  endpointPrefix: 'logs',
  signingName: 'logs',
  targetPrefix: 'Logs_20140328',
  version: '1.1',
};
export const CODEBUILD: JsonService = {
  id: 'CODEBUILD',
  endpointPrefix: 'codebuild',
  signingName: 'codebuild',
  targetPrefix: 'CodeBuild_20161006',
  version: '1.1',
};
export const ECR: JsonService = {
  id: 'ECR',
  endpointPrefix: 'api.ecr',
  signingName: 'ecr',
  targetPrefix: 'AmazonEC2ContainerRegistry_V20150921',
  version: '1.1',
};

/** What the SDK puts on every output and error. */
export interface ResponseMetadata {
  httpStatusCode?: number;
  requestId?: string;
  attempts?: number;
}

/**
 * An error answered by the service (or a failed request): `name` is the error code
 * (`ConditionalCheckFailedException`, `ResourceNotFoundException`…), other fields of the error body are
 * copied on it as the SDK's modeled exceptions carry them.
 */
export class AwsServiceError extends Error {
  readonly $fault: 'client' | 'server';
  readonly $metadata: ResponseMetadata;
  /** True when the standard retry mode would try the call again. */
  readonly $retryable: boolean;
  [field: string]: unknown;

  constructor(code: string, message: string, status: number, requestId?: string, fields: object = {}) {
    super(message);
    Object.assign(this, fields);
    this.name = code;
    this.$fault = status >= 500 ? 'server' : 'client';
    this.$metadata = { httpStatusCode: status, ...(requestId ? { requestId } : {}) };
    this.$retryable = status >= 500 || status === 429 || RETRYABLE_CODES.has(code);
  }
}

/** Whether `err` is an error the service answered with one of `codes` (its `name`, as the SDK names them). */
export function isAwsError(err: unknown, ...codes: string[]): boolean {
  const name = (err as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && codes.includes(name);
}

/**
 * Secrets Manager `GetSecretValue` of `secretId`: its string value (undefined for a binary one). Errors are
 * the service's (`ResourceNotFoundException`…), for the caller to judge.
 */
export async function getSecretString(client: AwsJsonClient, secretId: string): Promise<string | undefined> {
  return (await client.call<{ SecretString?: string }>('GetSecretValue', { SecretId: secretId }))
    .SecretString;
}

/** The SDK's throttling and transient error codes (@smithy/service-error-classification). */
const RETRYABLE_CODES = new Set([
  'BandwidthLimitExceeded',
  'EC2ThrottledException',
  'LimitExceededException',
  'PriorRequestNotComplete',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'RequestThrottledException',
  'SlowDown',
  'ThrottledException',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'TransactionInProgressException',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

/** Network failures worth another attempt (a reused keep-alive socket closed by the peer, say). */
const RETRYABLE_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN']);

function retryable(err: unknown): boolean {
  if (err instanceof AwsServiceError) return err.$retryable;
  const e = err as { code?: string; name?: string };
  return RETRYABLE_NETWORK.has(e?.code ?? '') || e?.name === 'TimeoutError';
}

/** The error code of an answer: `x-amzn-errortype`, else the body's `__type`/`code`, without namespace. */
export function errorCode(header: string | undefined, body: Record<string, unknown>): string {
  const raw =
    header || (body.__type as string) || (body.code as string) || (body.Code as string) || 'UnknownError';
  return raw.split(':')[0]!.split('#').pop()!;
}

export interface AwsJsonClientOptions {
  region: string;
  /** Overrides the configured endpoint (a URL). */
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
  /** The HTTP handler (a unix-socket agent for the local dynalite, say); one keep-alive handler otherwise. */
  handler?: Pick<NodeHttpHandler, 'handle'>;
  retry?: RetryOptions;
}

/** A JSON-protocol client of one service; create one per container and reuse it. */
export class AwsJsonClient {
  private readonly signer: SignatureV4;
  private readonly handler: Pick<NodeHttpHandler, 'handle'>;
  private readonly url: URL;
  private readonly contentType: string;

  constructor(
    readonly service: JsonService,
    private readonly opts: AwsJsonClientOptions,
  ) {
    this.signer = new SignatureV4({
      credentials: opts.credentials ?? defaultProvider(),
      region: opts.region,
      service: service.signingName,
      sha256: NodeSha256,
      applyChecksum: false,
    });
    this.handler = opts.handler ?? new NodeHttpHandler();
    this.url = new URL(
      opts.endpoint ??
        configuredEndpoint(service.id) ??
        `https://${service.endpointPrefix}.${opts.region}.amazonaws.com`,
    );
    this.contentType = `application/x-amz-json-${service.version}`;
  }

  /** Call `operation` with `input`; the output as the service answered it, plus `$metadata`. */
  async call<T = Record<string, unknown>>(
    operation: string,
    input: object,
  ): Promise<T & { $metadata: ResponseMetadata }> {
    const body = JSON.stringify(input);
    let attempts = 0;
    const out = await withRetries(
      () => {
        attempts++;
        return this.once(operation, body);
      },
      retryable,
      this.opts.retry,
    );
    out.$metadata.attempts = attempts;
    return out as T & { $metadata: ResponseMetadata };
  }

  private async once(
    operation: string,
    body: string,
  ): Promise<Record<string, unknown> & { $metadata: ResponseMetadata }> {
    const u = this.url;
    const request = await this.signer.sign({
      method: 'POST',
      protocol: u.protocol,
      hostname: u.hostname,
      ...(u.port ? { port: Number(u.port) } : {}),
      path: u.pathname || '/',
      query: {},
      headers: {
        host: u.host,
        'content-type': this.contentType,
        'content-length': String(Buffer.byteLength(body)),
        'x-amz-target': `${this.service.targetPrefix}.${operation}`,
      },
      body,
    });
    const { response } = await this.handler.handle(request as Parameters<NodeHttpHandler['handle']>[0]);
    const text = await readBody(response.body as Readable | undefined);
    const requestId = (response.headers['x-amzn-requestid'] ?? response.headers['x-amz-request-id']) as
      | string
      | undefined;
    let parsed: Record<string, unknown> = {};
    if (text) {
      try {
        parsed = JSON.parse(text) as Record<string, unknown>;
      } catch {
        if (response.statusCode < 300)
          throw new AwsServiceError('SerializationError', 'not JSON', response.statusCode, requestId);
      }
    }
    const $metadata: ResponseMetadata = {
      httpStatusCode: response.statusCode,
      ...(requestId ? { requestId } : {}),
    };
    if (response.statusCode < 300) return Object.assign(parsed, { $metadata });
    const code = errorCode(response.headers['x-amzn-errortype'] as string | undefined, parsed);
    const { __type: _t, message, Message, code: _c, ...fields } = parsed;
    throw new AwsServiceError(
      code,
      String(message ?? Message ?? `${code} (HTTP ${response.statusCode})`),
      response.statusCode,
      requestId,
      fields,
    );
  }
}

/** The answer's body as text (listeners, not `for await`: no async iterator per call). */
function readBody(body: Readable | undefined): Promise<string> {
  if (!body) return Promise.resolve('');
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    body.on('data', (chunk: Buffer) => chunks.push(chunk));
    body.once('end', () => {
      ended = true;
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    });
    body.once('error', reject);
    // A connection closed before the answer ended: a network failure, tried again as one.
    body.once('close', () => {
      if (!ended)
        reject(Object.assign(new Error('connection closed before the answer ended'), { code: 'ECONNRESET' }));
    });
  });
}
