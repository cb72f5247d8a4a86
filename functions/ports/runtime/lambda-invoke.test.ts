import { Readable } from 'node:stream';
import { describe, expect, test } from '@jest/globals';
import { sha256Hex, sigv4Signature } from '../../../test/support/sigv4.js';
import { INVOKE_ATTEMPTS, LambdaInvokeError, LambdaInvoker, lambdaEndpoint } from './lambda-invoke.js';

/*
 * The rollout watcher's asynchronous Lambda Invoke without the SDK client: the request it signs, checked
 * against SigV4 recomputed here from its parts (node:crypto, not the SDK's signer), where it is sent, and
 * how it retries. Sent for real against the fake Lambda API: eks.test.ts (the watcher's self-invocation)
 * and the cloud tier.
 */

const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
const FN = 'arn:aws:lambda:eu-west-1:000000000000:function:rollout-watcher';
const DATE = new Date('2026-01-02T03:04:05Z');

type Sent = {
  method: string;
  path: string;
  hostname: string;
  port?: number;
  protocol: string;
  headers: Record<string, string>;
  body: string;
};
function stub(answers: ({ status: number; headers?: Record<string, string>; body?: string } | Error)[]) {
  const sent: Sent[] = [];
  const handler = {
    handle: async (req: unknown) => {
      sent.push(req as Sent);
      const a = answers.shift();
      if (!a) throw new Error('no more answers');
      if (a instanceof Error) throw a;
      return {
        response: {
          statusCode: a.status,
          headers: a.headers ?? {},
          body: Readable.from([Buffer.from(a.body ?? '')]),
        },
      };
    },
  };
  return { sent, handler: handler as never };
}
const invoker = (handler: never, endpoint?: string) =>
  new LambdaInvoker({
    region: 'eu-west-1',
    credentials: async () => CREDENTIALS,
    endpoint,
    handler,
    backoffMs: () => 1,
    signingDate: () => DATE,
  });

/** SigV4 of a request, from the headers its Authorization says it signed (by hand: test/support/sigv4.ts). */
function expectedSignature(req: Sent, signedHeaders: string[]): string {
  // Every service but S3: each path segment URI-encoded (again) in the canonical request.
  const canonicalUri = req.path
    .split('/')
    .map((seg) => encodeURIComponent(seg))
    .join('/');
  const lower = Object.fromEntries(
    Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), String(v).trim()]),
  );
  const canonicalRequest = [
    req.method,
    canonicalUri,
    '',
    ...signedHeaders.map((h) => `${h}:${lower[h]}`),
    '',
    signedHeaders.join(';'),
    sha256Hex(req.body),
  ].join('\n');
  return sigv4Signature({
    canonicalRequest,
    amzDate: lower['x-amz-date']!,
    region: 'eu-west-1',
    service: 'lambda',
    secretAccessKey: CREDENTIALS.secretAccessKey,
  }).signature;
}

describe('the asynchronous Lambda Invoke', () => {
  test('is a SigV4-signed POST /2015-03-31/functions/{name}/invocations with X-Amz-Invocation-Type: Event', async () => {
    const { sent, handler } = stub([{ status: 202 }]);
    const event = { target: { orgId: 'o' }, hop: 1 };
    await invoker(handler, 'http://127.0.0.1:4566').invokeAsync(FN, event);
    expect(sent).toHaveLength(1);
    const req = sent[0]!;
    expect(req).toMatchObject({ method: 'POST', protocol: 'http:', hostname: '127.0.0.1', port: 4566 });
    expect(req.path).toBe(`/2015-03-31/functions/${encodeURIComponent(FN)}/invocations`);
    expect(JSON.parse(req.body)).toEqual(event);
    expect(req.headers['x-amz-invocation-type']).toBe('Event');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers.host).toBe('127.0.0.1:4566');
    expect(req.headers['x-amz-date']).toBe('20260102T030405Z');
    const auth =
      /^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
        req.headers.authorization!,
      );
    expect(auth).not.toBeNull();
    expect(auth![1]).toBe(`${CREDENTIALS.accessKeyId}/20260102/eu-west-1/lambda/aws4_request`);
    const signed = auth![2]!.split(';');
    expect(signed).toEqual(
      expect.arrayContaining(['host', 'x-amz-date', 'x-amz-invocation-type', 'content-type']),
    );
    expect(auth![3]).toBe(expectedSignature(req, signed));
  });

  test('goes to AWS_ENDPOINT_URL_LAMBDA, else AWS_ENDPOINT_URL, else the regional endpoint', () => {
    expect(
      lambdaEndpoint('eu-west-1', { AWS_ENDPOINT_URL_LAMBDA: 'http://a:1', AWS_ENDPOINT_URL: 'http://b:2' }),
    ).toBe('http://a:1');
    expect(lambdaEndpoint('eu-west-1', { AWS_ENDPOINT_URL: 'http://b:2' })).toBe('http://b:2');
    expect(lambdaEndpoint('eu-west-1', {})).toBe('https://lambda.eu-west-1.amazonaws.com');
    expect(lambdaEndpoint('cn-north-1', {})).toBe('https://lambda.cn-north-1.amazonaws.com.cn');
  });

  test('the regional endpoint is https on the default port', async () => {
    const { sent, handler } = stub([{ status: 202 }]);
    await invoker(handler, 'https://lambda.eu-west-1.amazonaws.com').invokeAsync('rollout-watcher', {});
    expect(sent[0]).toMatchObject({ protocol: 'https:', hostname: 'lambda.eu-west-1.amazonaws.com' });
    expect(sent[0]!.port).toBeUndefined();
    expect(sent[0]!.path).toBe('/2015-03-31/functions/rollout-watcher/invocations');
  });

  test('retries throttling, server errors and network failures, then succeeds', async () => {
    const { sent, handler } = stub([
      {
        status: 429,
        headers: { 'x-amzn-errortype': 'TooManyRequestsException' },
        body: '{"message":"Rate exceeded"}',
      },
      new Error('socket hang up'),
      { status: 202 },
    ]);
    await invoker(handler).invokeAsync(FN, {});
    expect(sent).toHaveLength(3);
    // Each attempt is the same signed request.
    for (const r of sent) {
      expect(r.path).toBe(sent[0]!.path);
      expect(r.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=.*\/lambda\/aws4_request/);
    }
  });

  test(`gives up after ${INVOKE_ATTEMPTS} attempts with a typed error`, async () => {
    const answer = {
      status: 503,
      headers: { 'x-amzn-errortype': 'ServiceException' },
      body: '{"Message":"down"}',
    };
    const { sent, handler } = stub([answer, answer, answer, answer]);
    const err = await invoker(handler)
      .invokeAsync(FN, {})
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LambdaInvokeError);
    expect(err).toMatchObject({ name: 'ServiceException', message: 'down', status: 503, retryable: true });
    expect(sent).toHaveLength(INVOKE_ATTEMPTS);
  });

  test('does not retry a client error: the error names Lambda’s error type', async () => {
    const { sent, handler } = stub([
      {
        status: 404,
        headers: { 'x-amzn-errortype': 'ResourceNotFoundException:http://internal.amazon.com/' },
        body: '{"Type":"User","message":"Function not found: rollout-watcher"}',
      },
    ]);
    const err = await invoker(handler)
      .invokeAsync(FN, {})
      .catch((e: unknown) => e);
    expect(err).toMatchObject({
      name: 'ResourceNotFoundException',
      message: 'Function not found: rollout-watcher',
      status: 404,
      retryable: false,
    });
    expect(sent).toHaveLength(1);
  });

  test('an unexpected success status (not 202) is an error too', async () => {
    const { handler } = stub([{ status: 200, body: '{}' }]);
    await expect(invoker(handler).invokeAsync(FN, {})).rejects.toMatchObject({
      name: 'UnexpectedStatus',
      status: 200,
    });
  });
});
