import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { sha256Hex, sigv4Signature } from '../../test/support/sigv4.js';
import {
  AwsJsonClient,
  AwsServiceError,
  DYNAMODB,
  ECR,
  errorCode,
  SECRETS_MANAGER,
  SFN,
} from './aws-json.js';

const CREDENTIALS = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
};
const noWait = { backoffMs: () => 0, sleep: async () => undefined };

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A loopback service answering each request with the next scripted answer (or dropping the connection). */
class Service {
  readonly sent: Sent[] = [];
  answers: ({ status: number; headers?: Record<string, string>; body?: unknown } | 'drop' | 'truncate')[] =
    [];
  private server?: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      this.sent.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers as Record<string, string>,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const answer = this.answers.shift() ?? { status: 200, body: {} };
      if (answer === 'drop') return void req.socket.destroy();
      if (answer === 'truncate') {
        // Headers and the start of a body, then the connection closes mid-answer.
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0', 'content-length': '100' });
        res.write('{"Items":[');
        return void setTimeout(() => req.socket.destroy(), 10);
      }
      res.writeHead(answer.status, { 'content-type': 'application/x-amz-json-1.0', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }
  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => this.server!.close(() => resolve()));
  }
}

const service = new Service();
beforeAll(() => service.start());
afterAll(() => service.stop());

const client = (svc = DYNAMODB) =>
  new AwsJsonClient(svc, {
    region: 'eu-west-1',
    endpoint: service.url,
    credentials: async () => CREDENTIALS,
    retry: noWait,
  });

describe('AwsJsonClient: the request', () => {
  test('POST / with the target, the JSON content type and the input as the body', async () => {
    service.sent.length = 0;
    service.answers = [{ status: 200, body: { Item: { id: { S: 'a' } } } }];
    const out = await client().call('GetItem', { TableName: 't', Key: { id: { S: 'a' } } });
    expect(out).toMatchObject({ Item: { id: { S: 'a' } }, $metadata: { httpStatusCode: 200, attempts: 1 } });
    const [req] = service.sent;
    expect(req).toMatchObject({ method: 'POST', path: '/' });
    expect(req!.headers['x-amz-target']).toBe('DynamoDB_20120810.GetItem');
    expect(req!.headers['content-type']).toBe('application/x-amz-json-1.0');
    expect(JSON.parse(req!.body)).toEqual({ TableName: 't', Key: { id: { S: 'a' } } });

    service.answers = [{ status: 200, body: {} }];
    await client(SECRETS_MANAGER).call('GetSecretValue', { SecretId: 's' });
    expect(service.sent[1]!.headers['x-amz-target']).toBe('secretsmanager.GetSecretValue');
    expect(service.sent[1]!.headers['content-type']).toBe('application/x-amz-json-1.1');
  });

  test('signed with SigV4 for the service and region, as AWS computes it', async () => {
    service.sent.length = 0;
    await client(SFN).call('StartExecution', { stateMachineArn: 'arn', input: '{}' });
    const req = service.sent[0]!;
    const auth =
      /^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
        req.headers.authorization!,
      );
    expect(auth).not.toBeNull();
    const [, credential, signedHeaders, signature] = auth!;
    const amzDate = req.headers['x-amz-date']!;
    expect(credential).toBe(`AKIDEXAMPLE/${amzDate.slice(0, 8)}/eu-west-1/states/aws4_request`);
    const names = signedHeaders!.split(';');
    expect(names).toEqual(expect.arrayContaining(['host', 'x-amz-date', 'x-amz-target', 'content-type']));
    const canonicalRequest = [
      'POST',
      '/',
      '',
      ...names.map((n) => `${n}:${req.headers[n]!.trim()}`),
      '',
      signedHeaders,
      sha256Hex(req.body),
    ].join('\n');
    const expected = sigv4Signature({
      canonicalRequest,
      amzDate,
      region: 'eu-west-1',
      service: 'states',
      secretAccessKey: CREDENTIALS.secretAccessKey,
    });
    expect(signature).toBe(expected.signature);
  });

  test("AWS's regional endpoint unless one is configured", async () => {
    const seen: string[] = [];
    const handler = {
      handle: async (r: { protocol: string; hostname: string; path: string }) => {
        seen.push(`${r.protocol}//${r.hostname}${r.path}`);
        return { response: { statusCode: 200, headers: {}, body: Readable.from([Buffer.from('{}')]) } };
      },
    };
    const saved = { ...process.env };
    try {
      for (const k of Object.keys(process.env)) if (k.startsWith('AWS_ENDPOINT_URL')) delete process.env[k];
      const opts = { region: 'us-east-2', credentials: async () => CREDENTIALS, handler } as never;
      await new AwsJsonClient(DYNAMODB, opts).call('GetItem', {});
      await new AwsJsonClient(ECR, opts).call('BatchGetImage', {});
      process.env.AWS_ENDPOINT_URL_DYNAMODB = 'http://localhost:8000';
      await new AwsJsonClient(DYNAMODB, opts).call('GetItem', {});
    } finally {
      process.env = saved;
    }
    expect(seen).toEqual([
      'https://dynamodb.us-east-2.amazonaws.com/',
      'https://api.ecr.us-east-2.amazonaws.com/',
      'http://localhost/',
    ]);
  });
});

describe('AwsJsonClient: errors', () => {
  test("named by the service's code, with its message and fields, as a client fault", async () => {
    const reasons = [{ Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' }];
    service.answers = [
      {
        status: 400,
        body: {
          __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
          message: 'Transaction cancelled',
          CancellationReasons: reasons,
        },
        headers: { 'x-amzn-requestid': 'REQ1' },
      },
    ];
    const err = (await client()
      .call('TransactWriteItems', {})
      .catch((e: unknown) => e)) as AwsServiceError;
    expect(err).toBeInstanceOf(AwsServiceError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('TransactionCanceledException');
    expect(err.message).toBe('Transaction cancelled');
    expect(err.CancellationReasons).toEqual(reasons);
    expect(err.$fault).toBe('client');
    expect(err.$metadata).toMatchObject({ httpStatusCode: 400, requestId: 'REQ1' });
    expect(err.__type).toBeUndefined();
  });

  test('the code from x-amzn-errortype first, without its namespace or URL', () => {
    expect(errorCode('ResourceNotFoundException:http://internal.amazon.com/coral/x/', {})).toBe(
      'ResourceNotFoundException',
    );
    expect(errorCode(undefined, { __type: 'com.amazon.coral.service#AccessDeniedException' })).toBe(
      'AccessDeniedException',
    );
    expect(errorCode(undefined, { code: 'ValidationException' })).toBe('ValidationException');
    expect(errorCode(undefined, {})).toBe('UnknownError');
  });

  test('a condition failure is not tried again', async () => {
    service.sent.length = 0;
    service.answers = [
      {
        status: 400,
        body: { __type: 'x#ConditionalCheckFailedException', Message: 'The conditional request failed' },
      },
    ];
    const err = (await client()
      .call('PutItem', {})
      .catch((e: unknown) => e)) as AwsServiceError;
    expect(err.name).toBe('ConditionalCheckFailedException');
    expect(err.message).toBe('The conditional request failed');
    expect(service.sent).toHaveLength(1);
  });

  test('5xx, throttling and a dropped connection are tried again, three attempts in all', async () => {
    service.sent.length = 0;
    service.answers = [
      { status: 500, body: { __type: 'InternalServerError' } },
      { status: 400, body: { __type: 'x#ProvisionedThroughputExceededException' } },
      { status: 200, body: { Count: 0 } },
    ];
    const out = await client().call('Query', {});
    expect(out).toMatchObject({ Count: 0, $metadata: { attempts: 3 } });

    service.answers = ['drop', { status: 200, body: { ok: true } }];
    expect(await client().call('GetItem', {})).toMatchObject({ ok: true, $metadata: { attempts: 2 } });

    service.answers = ['truncate', { status: 200, body: { ok: 'whole' } }];
    expect(await client().call('GetItem', {})).toMatchObject({ ok: 'whole', $metadata: { attempts: 2 } });

    service.answers = [
      { status: 503, body: {} },
      { status: 503, body: {} },
      { status: 503, body: {} },
      { status: 200, body: {} },
    ];
    const err = (await client()
      .call('GetItem', {})
      .catch((e: unknown) => e)) as AwsServiceError;
    expect(err.$fault).toBe('server');
    expect(err.$metadata.httpStatusCode).toBe(503);
    expect(service.answers).toHaveLength(1);
    service.answers = [];
  });
});
