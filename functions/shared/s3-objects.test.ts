import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { canonicalQuery, sigv4Signature } from '../../test/support/sigv4.js';
import { parseEndpoint, S3Objects, type S3Target } from './s3-objects.js';

/*
 * S3Objects against a scripted loopback server: what each request looks like (its SigV4 signature is
 * recomputed by hand, as S3 would check it), which failures are retried and how errors are named. The
 * contract tests (ports/media, ports/artifacts) run it against the AWS fake.
 */

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}
type Answer = { status: number; body?: string; headers?: Record<string, string> };

let server: Server;
let seen: Seen[] = [];
let script: Answer[] = [];
const CREDENTIALS = {
  accessKeyId: 'AKIDTEST',
  secretAccessKey: 'test-secret',
  sessionToken: 'session/token',
};
let target: S3Target;

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
      const a = script.shift() ?? { status: 200 };
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  target = {
    region: 'eu-west-1',
    endpoint: parseEndpoint(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    credentials: async () => CREDENTIALS,
  };
});
afterAll(async () => {
  await new Promise<void>((done) => server.close(() => done()));
});
beforeEach(() => {
  seen = [];
  script = [];
});

const sleeps: number[] = [];
const objects = (opts: { partSize?: number } = {}) =>
  new S3Objects(target, 'bucket', {
    ...opts,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });

/** The Authorization S3 expects (SigV4 by hand, test/support/sigv4.ts). */
function expectedAuthorization(req: Seen): string {
  const url = new URL(req.url, 'http://x');
  const auth = String(req.headers.authorization);
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(auth)![1]!;
  const canonicalHeaders = signedHeaders
    .split(';')
    .map((h) => `${h}:${String(req.headers[h]).trim()}\n`)
    .join('');
  const canonicalRequest = [
    req.method,
    url.pathname,
    canonicalQuery(url.searchParams),
    canonicalHeaders,
    signedHeaders,
    String(req.headers['x-amz-content-sha256']),
  ].join('\n');
  const { signature, scope } = sigv4Signature({
    canonicalRequest,
    amzDate: String(req.headers['x-amz-date']),
    region: 'eu-west-1',
    service: 's3',
    secretAccessKey: CREDENTIALS.secretAccessKey,
  });
  return `AWS4-HMAC-SHA256 Credential=${CREDENTIALS.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
}

describe('requests', () => {
  test('PutObject: path-style, the body and its SHA-256, content type, session token, a valid signature', async () => {
    const body = Buffer.from('a screenshot');
    await objects().put('runs/o/r (1)/step 1.png', body, 'image/png');
    expect(seen).toHaveLength(1);
    const req = seen[0]!;
    expect(req.method).toBe('PUT');
    expect(req.url).toBe('/bucket/runs/o/r%20%281%29/step%201.png');
    expect(req.body).toEqual(body);
    expect(req.headers['content-type']).toBe('image/png');
    expect(req.headers['x-amz-content-sha256']).toBe(createHash('sha256').update(body).digest('hex'));
    expect(req.headers['x-amz-security-token']).toBe(CREDENTIALS.sessionToken);
    expect(String(req.headers.authorization)).toMatch(
      /SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token,/,
    );
    expect(req.headers.authorization).toBe(expectedAuthorization(req));
  });

  test('HeadObject: 200 is true, 404 false; the multipart calls carry their queries, signed', async () => {
    script = [{ status: 200 }, { status: 404 }];
    expect(await objects().exists('sources/a.tar.gz')).toBe(true);
    expect(await objects().exists('sources/b.tar.gz')).toBe(false);
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      'HEAD /bucket/sources/a.tar.gz',
      'HEAD /bucket/sources/b.tar.gz',
    ]);
    seen = [];
    script = [
      {
        status: 200,
        body: '<InitiateMultipartUploadResult><UploadId>id/1+x</UploadId></InitiateMultipartUploadResult>',
      },
      { status: 200, headers: { etag: '"e1"' } },
      { status: 200, headers: { etag: '"e2"' } },
      { status: 200, body: '<CompleteMultipartUploadResult></CompleteMultipartUploadResult>' },
    ];
    await objects({ partSize: 4 }).upload(
      'sources/c.tar.gz',
      Readable.from([Buffer.from('12345'), Buffer.from('67')]),
      'application/gzip',
    );
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /bucket/sources/c.tar.gz?uploads=',
      'PUT /bucket/sources/c.tar.gz?partNumber=1&uploadId=id%2F1%2Bx',
      'PUT /bucket/sources/c.tar.gz?partNumber=2&uploadId=id%2F1%2Bx',
      'POST /bucket/sources/c.tar.gz?uploadId=id%2F1%2Bx',
    ]);
    expect(seen[0]!.headers['content-type']).toBe('application/gzip');
    expect(seen.map((r) => r.body.toString())).toEqual([
      '',
      '12345',
      '67',
      '<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><PartNumber>1</PartNumber><ETag>&quot;e1&quot;</ETag></Part><Part><PartNumber>2</PartNumber><ETag>&quot;e2&quot;</ETag></Part></CompleteMultipartUpload>',
    ]);
    for (const req of seen) expect(req.headers.authorization).toBe(expectedAuthorization(req));
  });

  test('without an endpoint: virtual-hosted AWS addressing', async () => {
    const requested: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (url: string) => {
      requested.push(url);
      return new Response(null, { status: 200 });
    }) as typeof fetch;
    try {
      await new S3Objects({ region: 'eu-west-1', credentials: async () => CREDENTIALS }, 'my-bucket').put(
        'runs/a.png',
        Buffer.from('x'),
        'image/png',
      );
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(requested).toEqual(['https://my-bucket.s3.eu-west-1.amazonaws.com/runs/a.png']);
  });
});

describe('failures', () => {
  test('5xx and throttling are retried with backoff, up to 3 attempts', async () => {
    sleeps.length = 0;
    script = [
      {
        status: 503,
        body: '<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>',
      },
      {
        status: 500,
        body: '<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>',
      },
      { status: 200 },
    ];
    await objects().put('k', Buffer.from('x'), 'image/png');
    expect(seen).toHaveLength(3);
    expect(sleeps).toHaveLength(2);
    // Each attempt is signed anew, with the same body.
    for (const req of seen) expect(req.body.toString()).toBe('x');
  });

  test('a failure that persists is thrown named by its S3 code, after 3 attempts', async () => {
    script = Array(3).fill({
      status: 500,
      body: '<Error><Code>InternalError</Code><Message>oops</Message></Error>',
    });
    await expect(objects().put('runs/k.png', Buffer.from('x'), 'image/png')).rejects.toMatchObject({
      name: 'InternalError',
      status: 500,
      message: 'S3 PutObject of s3://bucket/runs/k.png: InternalError: oops',
    });
    expect(seen).toHaveLength(3);
  });

  test('a client error is thrown at once; a HEAD error (no body) is named by its status', async () => {
    script = [
      { status: 403, body: '<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>' },
      { status: 403 },
    ];
    await expect(objects().put('k', Buffer.from('x'), 'image/png')).rejects.toMatchObject({
      name: 'AccessDenied',
      status: 403,
    });
    await expect(objects().exists('k')).rejects.toMatchObject({ name: 'Forbidden', status: 403 });
    expect(seen).toHaveLength(2);
  });

  test('CompleteMultipartUpload answering 200 with an error is retried; a part that fails aborts the upload', async () => {
    script = [
      {
        status: 200,
        body: '<InitiateMultipartUploadResult><UploadId>u</UploadId></InitiateMultipartUploadResult>',
      },
      { status: 200, headers: { etag: '"e1"' } },
      { status: 200, headers: { etag: '"e2"' } },
      { status: 200, body: '<Error><Code>InternalError</Code><Message>retry</Message></Error>' },
      { status: 200, body: '<CompleteMultipartUploadResult></CompleteMultipartUploadResult>' },
    ];
    await objects({ partSize: 1 }).upload(
      'a',
      Readable.from([Buffer.from('1'), Buffer.from('2')]),
      'application/gzip',
    );
    expect(seen.map((r) => r.method)).toEqual(['POST', 'PUT', 'PUT', 'POST', 'POST']);
    seen = [];
    script = [
      {
        status: 200,
        body: '<InitiateMultipartUploadResult><UploadId>u</UploadId></InitiateMultipartUploadResult>',
      },
      { status: 400, body: '<Error><Code>EntityTooSmall</Code><Message>too small</Message></Error>' },
      { status: 204 },
    ];
    await expect(
      objects({ partSize: 1 }).upload(
        'a',
        Readable.from([Buffer.from('1'), Buffer.from('2')]),
        'application/gzip',
      ),
    ).rejects.toMatchObject({ name: 'EntityTooSmall' });
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST /bucket/a?uploads=',
      'PUT /bucket/a?partNumber=1&uploadId=u',
      'DELETE /bucket/a?uploadId=u',
    ]);
  });

  test('a stream that ends as it fills its first part is one PutObject', async () => {
    await objects({ partSize: 4 }).upload(
      'one',
      Readable.from([Buffer.from('12'), Buffer.from('3456')]),
      'text/plain',
    );
    expect(seen.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(['PUT /bucket/one 123456']);
  });

  test('no answer (connection refused) is a NetworkError after the attempts', async () => {
    const closed = new S3Objects({ ...target, endpoint: parseEndpoint('http://127.0.0.1:1') }, 'bucket', {
      sleep: async () => undefined,
    });
    await expect(closed.put('k', Buffer.from('x'), 'image/png')).rejects.toMatchObject({
      name: 'NetworkError',
      status: 0,
    });
  });
});
