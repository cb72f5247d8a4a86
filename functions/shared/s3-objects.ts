import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { configuredEndpoint, STANDARD_ATTEMPTS, withRetries } from './aws-http.js';
import { NodeSha256 } from './sha256.js';

/*
 * S3 objects without the S3 client: presigned GETs, and the few object writes the cloud adapters make
 * (PutObject, HeadObject, and a multipart upload for a stream of unknown length), signed with SigV4 by
 * @smithy/signature-v4 (which every bundle already carries for its other SDK clients) and sent with
 * Node's fetch. @aws-sdk/client-s3 with its S3-only pieces (flexible checksums, middleware-sdk-s3,
 * lib-storage, the endpoint ruleset) weighs about 150 KB minified in each bundle; this is a few KB.
 *
 * What it keeps of the SDK's behaviour: the same credentials (`@aws-sdk/credential-provider-node`'s
 * default chain unbundled; the environment in Lambda bundles, see shared/lambda-credentials.ts), the
 * region, the custom endpoint of `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (unless
 * `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), up to 3 attempts with jittered exponential backoff for
 * network errors, 5xx, 429 and S3's throttling codes, errors named by S3's error code. Integrity: each
 * request signs the SHA-256 of its body (`x-amz-content-sha256`), which S3 checks before storing anything.
 * What it does not do: shared config files (`endpoint_url` in ~/.aws/config; none exists in Lambda),
 * dual-stack, accelerate, FIPS or non-`aws` partitions (the media and artifacts buckets are in the
 * stack's own region), clock-skew correction.
 *
 * Addressing: a custom endpoint (an S3-compatible store, a test fake) path-style
 * (`<endpoint>/<bucket>/<key>`); AWS virtual-hosted (`https://<bucket>.s3.<region>.amazonaws.com/<key>`).
 */

/** A custom S3 endpoint, as the SDK parses one (`port` only when the URL names one). */
export interface S3Endpoint {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
}

/** Where S3 requests go and who signs them. */
export interface S3Target {
  region: string;
  endpoint?: S3Endpoint;
  credentials: AwsCredentialIdentityProvider;
}

export function parseEndpoint(url: string | URL): S3Endpoint {
  const u = new URL(url);
  return {
    protocol: u.protocol,
    hostname: u.hostname,
    ...(u.port ? { port: Number(u.port) } : {}),
    path: u.pathname,
  };
}

/** The S3 target of this process: the region given, the endpoint and credentials the SDK would use. */
export function s3TargetFromEnv(region: string, env: NodeJS.ProcessEnv = process.env): S3Target {
  const url = configuredEndpoint('S3', env);
  return {
    region,
    ...(url ? { endpoint: parseEndpoint(url) } : {}),
    credentials: defaultProvider(),
  };
}

/** A key as a URL path, each segment percent-encoded (`encodeURIComponent`, as presigned URLs have it). */
const encodeKey = (key: string): string => key.split('/').map(encodeURIComponent).join('/');

/** RFC 3986 encoding (SigV4's UriEncode): also `!'()*`, which `encodeURIComponent` leaves. */
const uriEncode = (s: string): string =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

interface Address {
  protocol: string;
  hostname: string;
  port?: number;
  /** `hostname[:port]`: the Host header. */
  host: string;
  path: string;
}

function address(target: S3Target, bucket: string, encodedKey: string): Address {
  const custom = target.endpoint;
  const protocol = custom?.protocol ?? 'https:';
  const hostname = custom?.hostname ?? `${bucket}.s3.${target.region}.amazonaws.com`;
  const port = custom?.port;
  const path = custom
    ? `${(custom.path ?? '').replace(/\/+$/, '')}/${bucket}/${encodedKey}`
    : `/${encodedKey}`;
  return { protocol, hostname, port, host: port ? `${hostname}:${port}` : hostname, path };
}

function signer(target: S3Target): SignatureV4 {
  return new SignatureV4({
    credentials: target.credentials,
    region: target.region,
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
}

/**
 * A presigned GET URL of `bucket/key`, valid `expiresIn` seconds from `nowMs` (SigV4 query signing, as
 * @aws-sdk/s3-request-presigner does it: unsigned payload, `host` the only signed header).
 */
export async function presignGet(
  target: S3Target,
  bucket: string,
  key: string,
  expiresIn: number,
  nowMs: number,
): Promise<string> {
  const { protocol, hostname, port, host, path } = address(target, bucket, encodeKey(key));
  const signed = await signer(target).presign(
    {
      method: 'GET',
      protocol,
      hostname,
      port,
      path,
      query: {},
      headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    },
    { expiresIn, signingDate: new Date(nowMs) },
  );
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(signed.query ?? {}))
    for (const value of Array.isArray(v) ? v : [v]) if (value != null) query.append(k, value);
  return `${protocol}//${host}${path}?${query.toString()}`;
}

/** An S3 error answer (or, for `NetworkError`, no answer), named by S3's error code. */
export class S3Error extends Error {
  constructor(
    readonly code: string,
    message: string,
    /** The HTTP status; 0 when no answer came. */
    readonly status: number,
  ) {
    super(message);
    this.name = code;
  }
}

const RETRYABLE_CODES = new Set([
  'SlowDown',
  'RequestTimeout',
  'InternalError',
  'ServiceUnavailable',
  'Throttling',
  'ThrottlingException',
  'RequestLimitExceeded',
  'NetworkError',
]);
const retryable = (err: S3Error): boolean =>
  err.status >= 500 || err.status === 429 || RETRYABLE_CODES.has(err.code);

/** The code of a body-less error answer (a HEAD's), as the SDK names it. */
const STATUS_CODES: Record<number, string> = {
  301: 'PermanentRedirect',
  307: 'TemporaryRedirect',
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  412: 'PreconditionFailed',
  503: 'SlowDown',
};

const xmlText = (xml: string, tag: string): string | undefined => {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return m?.[1]
    ?.replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
};
const xmlEscape = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const sha256Hex = (body: Uint8Array): string => createHash('sha256').update(body).digest('hex');
const EMPTY = Buffer.alloc(0);

/** S3's smallest part (every part of a multipart upload but the last): 5 MiB, as lib-storage uses. */
export const MIN_PART_SIZE = 5 * 1024 * 1024;

export interface S3ObjectsOptions {
  /** Attempts per request (the SDK's standard retry mode: 3). */
  maxAttempts?: number;
  /** Bytes per part of a multipart upload; a stream no longer than this goes up as one PutObject. */
  partSize?: number;
  /** Backoff between attempts (tests pass a fast one). */
  sleep?: (ms: number) => Promise<void>;
}

interface S3Answer {
  status: number;
  headers: Headers;
  text: string;
}

interface S3Request {
  method: 'GET' | 'PUT' | 'POST' | 'HEAD' | 'DELETE';
  key: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Buffer;
}

/** The objects of one bucket: PutObject, HeadObject, and uploads of streams (see the file comment). */
export class S3Objects {
  private readonly signer: SignatureV4;
  private readonly maxAttempts: number;
  readonly partSize: number;
  private readonly sleep: ((ms: number) => Promise<void>) | undefined;

  constructor(
    private readonly target: S3Target,
    readonly bucket: string,
    opts: S3ObjectsOptions = {},
  ) {
    this.signer = signer(target);
    this.maxAttempts = opts.maxAttempts ?? STANDARD_ATTEMPTS;
    this.partSize = opts.partSize ?? MIN_PART_SIZE;
    this.sleep = opts.sleep;
  }

  /** PutObject: `body` under `key`, replacing what was there. */
  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    await this.send('PutObject', { method: 'PUT', key, body, headers: { 'content-type': contentType } });
  }

  /** HeadObject: whether an object exists under `key` (404 is false; any other failure throws). */
  async exists(key: string): Promise<boolean> {
    const res = await this.send('HeadObject', { method: 'HEAD', key }, 404);
    return res.status !== 404;
  }

  /**
   * Store a stream of unknown length under `key`: one PutObject when it ends within `partSize` bytes (plus
   * the chunk that reached it), else a multipart upload, one part in memory at a time (aborted if anything
   * fails).
   */
  async upload(key: string, body: Readable, contentType: string): Promise<void> {
    let chunks: Buffer[] = [];
    let size = 0;
    let uploadId: string | undefined;
    const parts: { number: number; etag: string }[] = [];
    const flush = async () => {
      const part = Buffer.concat(chunks, size);
      chunks = [];
      size = 0;
      uploadId ??= await this.createMultipartUpload(key, contentType);
      const number = parts.length + 1;
      const res = await this.send('UploadPart', {
        method: 'PUT',
        key,
        query: { partNumber: String(number), uploadId },
        body: part,
      });
      const etag = res.headers.get('etag');
      if (!etag)
        throw new S3Error('InvalidResponse', `S3 UploadPart of ${this.where(key)}: no ETag`, res.status);
      parts.push({ number, etag });
    };
    try {
      for await (const chunk of body) {
        const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array | string);
        // A full part goes up only once more data follows: a stream that ends there is one PutObject.
        if (size >= this.partSize) await flush();
        chunks.push(b);
        size += b.length;
      }
      if (uploadId === undefined) return await this.put(key, Buffer.concat(chunks, size), contentType);
      await flush();
      const xml = `<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${parts
        .map((p) => `<Part><PartNumber>${p.number}</PartNumber><ETag>${xmlEscape(p.etag)}</ETag></Part>`)
        .join('')}</CompleteMultipartUpload>`;
      await this.send('CompleteMultipartUpload', {
        method: 'POST',
        key,
        query: { uploadId },
        headers: { 'content-type': 'application/xml' },
        body: Buffer.from(xml, 'utf8'),
      });
    } catch (err) {
      if (uploadId !== undefined) {
        const id = uploadId;
        await this.send('AbortMultipartUpload', { method: 'DELETE', key, query: { uploadId: id } }).catch(
          () => undefined,
        );
      }
      throw err;
    }
  }

  private async createMultipartUpload(key: string, contentType: string): Promise<string> {
    const res = await this.send('CreateMultipartUpload', {
      method: 'POST',
      key,
      query: { uploads: '' },
      headers: { 'content-type': contentType },
    });
    const id = xmlText(res.text, 'UploadId');
    if (!id)
      throw new S3Error(
        'InvalidResponse',
        `S3 CreateMultipartUpload of ${this.where(key)}: no UploadId`,
        200,
      );
    return id;
  }

  private where(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  /** One operation, signed and sent, retried when worth it; `allow` is a non-2xx status to return. */
  private send(op: string, req: S3Request, allow?: number): Promise<S3Answer> {
    return withRetries(
      () => this.sendOnce(op, req, allow),
      (err) => err instanceof S3Error && retryable(err),
      { attempts: this.maxAttempts, ...(this.sleep ? { sleep: this.sleep } : {}) },
    );
  }

  /** One attempt, signed now; an answer that is an error, or none, throws `S3Error`. */
  private async sendOnce(op: string, req: S3Request, allow?: number): Promise<S3Answer> {
    const { protocol, hostname, port, host, path } = address(
      this.target,
      this.bucket,
      req.key.split('/').map(uriEncode).join('/'),
    );
    const body = req.body ?? (req.method === 'PUT' || req.method === 'POST' ? EMPTY : undefined);
    const query = req.query ?? {};
    const search = Object.entries(query)
      .map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`)
      .join('&');
    const url = `${protocol}//${host}${path}${search ? `?${search}` : ''}`;
    const signed = await this.signer.sign(
      {
        method: req.method,
        protocol,
        hostname,
        port,
        path,
        query,
        headers: { ...req.headers, host, 'x-amz-content-sha256': sha256Hex(body ?? EMPTY) },
      },
      { signingDate: new Date() },
    );
    const headers = new Headers();
    for (const [k, v] of Object.entries(signed.headers)) if (k !== 'host') headers.set(k, v);
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method: req.method,
        headers,
        body: body ? new Uint8Array(body.buffer, body.byteOffset, body.byteLength) : undefined,
        redirect: 'manual',
        // No answer within a minute plus 64 KB/s of the body: try again.
        signal: AbortSignal.timeout(60_000 + Math.ceil((body?.length ?? 0) / 64)),
      });
      text = req.method === 'HEAD' ? '' : await res.text();
    } catch (err) {
      throw new S3Error('NetworkError', `S3 ${op} of ${this.where(req.key)}: ${(err as Error).message}`, 0);
    }
    // CompleteMultipartUpload may answer 200 with an error in the body.
    const failed = res.status >= 300 || (op === 'CompleteMultipartUpload' && /<Error>/.test(text));
    if (!failed || res.status === allow) return { status: res.status, headers: res.headers, text };
    const code = xmlText(text, 'Code') ?? STATUS_CODES[res.status] ?? `Http${res.status}`;
    const message = xmlText(text, 'Message') ?? `HTTP ${res.status}`;
    throw new S3Error(code, `S3 ${op} of ${this.where(req.key)}: ${code}: ${message}`, res.status);
  }
}
