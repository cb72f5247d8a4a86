import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { MAX_JSON_DEPTH } from '../../../functions/api/route.js';
import { handler as listRuns } from '../../../functions/api/runs/list.js';
import { handler as startRun } from '../../../functions/api/runs/start.js';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { DEFAULT_MAX_BODY_BYTES } from '../../../functions/manifest/routes.js';
import { lambdaContext } from '../../../functions/shared/aws/lambda-context.js';
import { bearer, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { isErrorBody, type RawRequest, type RawResponse, rawRequest } from '../../support/raw-http.js';
import { closeSnapshots, snapshot } from '../../support/stored-state.js';

/*
 * Hardening, "no 500 from input": each original attack over real HTTP against the local server,
 * and at the handler level (the Lambda event API Gateway would send) where HTTP cannot express it. Every
 * answer is a 4xx `{"error": string}` or the route's normal answer, and nothing stored changes.
 */

const h = localServerForFile();
let apiKey: Record<string, string>;
let clientCreds: Record<string, string>;
let appId: string;
let before: Record<string, string[]>;

beforeAll(async () => {
  apiKey = bearer(h.org);
  clientCreds = client(h.org);
  appId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/hardening' })).applicationId;
  before = await snapshot(h.dataDir);
}, 60_000);
afterAll(async () => {
  closeSnapshots();
});

const send = (req: Omit<RawRequest, 'headers'> & { headers?: Record<string, string> | [string, string][] }) =>
  rawRequest(h.url, {
    ...req,
    headers: Array.isArray(req.headers) ? req.headers : Object.entries(req.headers ?? {}),
  });

/** A 4xx with exactly `{ "error": <message> }`. */
function expectError(res: RawResponse, status: number, message?: string | RegExp): void {
  expect({ status: res.status, json: res.json }).toEqual({ status, json: expect.anything() });
  expect(isErrorBody(res.json)).toBe(true);
  expect(res.headers['content-type']).toBe('application/json');
  if (message !== undefined) expect((res.json as { error: string }).error).toMatch(message);
}

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const secretPath = () => `/v1/preview/secrets/${appId}/web/API_TOKEN`;

describe('the body is read only after authentication', () => {
  test.each([
    ['100,000 levels deep', nested(100_000)],
    [
      '4,000 levels deep with a __proto__ inside',
      `${'{"a":'.repeat(4000)}{"__proto__":1}${'}'.repeat(4000)}`,
    ],
    ['not JSON', '{"value":'],
    ['not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
    ['over the route cap', JSON.stringify({ value: 'x'.repeat(300 * 1024) })],
    ['empty', ''],
  ])('without credentials a body %s is a 401, never a 400 or 500', async (_label, body) => {
    const res = await send({ method: 'PUT', target: secretPath(), body });
    expectError(res, 401, 'missing or invalid credentials');
    const wrong = await send({
      method: 'PUT',
      target: secretPath(),
      body,
      headers: { authorization: `Bearer pvk_abcdefgh_${'A'.repeat(43)}` },
    });
    expectError(wrong, 401, 'missing or invalid credentials');
  });
});

describe('body limits after authentication', () => {
  test(`JSON nested deeper than ${MAX_JSON_DEPTH} levels is a 400 naming the limit`, async () => {
    for (const depth of [MAX_JSON_DEPTH + 1, 4_000, 100_000]) {
      const res = await send({ method: 'PUT', target: secretPath(), body: nested(depth), headers: apiKey });
      expectError(res, 400, `request body is nested too deeply: at most ${MAX_JSON_DEPTH} levels`);
    }
  });

  test(`${MAX_JSON_DEPTH} levels are read (the limit counts objects and arrays)`, async () => {
    // A valid start-run body (unknown members are ignored) for a test that does not exist: 404, not 400.
    const inner = nested(MAX_JSON_DEPTH - 1);
    const ok = await send({
      method: 'POST',
      target: '/test/no-such-test/run',
      body: `{"source":"fuzz","extra":${inner}}`,
      headers: clientCreds,
    });
    expectError(ok, 404, 'test not found');
    const deeper = await send({
      method: 'POST',
      target: '/test/no-such-test/run',
      body: `{"source":"fuzz","extra":[${inner}]}`,
      headers: clientCreds,
    });
    expectError(deeper, 400, /nested too deeply/);
  });

  test('a body over the route cap is a 413; at the cap it is read', async () => {
    const padded = (bytes: number) => {
      const head = '{"source":"x","pad":"';
      return `${head}${'p'.repeat(bytes - head.length - 2)}"}`;
    };
    expect(Buffer.byteLength(padded(DEFAULT_MAX_BODY_BYTES))).toBe(DEFAULT_MAX_BODY_BYTES);
    const at = await send({
      method: 'POST',
      target: '/test/no-such-test/run',
      body: padded(DEFAULT_MAX_BODY_BYTES),
      headers: clientCreds,
    });
    expectError(at, 404, 'test not found');
    const over = await send({
      method: 'POST',
      target: '/test/no-such-test/run',
      body: padded(DEFAULT_MAX_BODY_BYTES + 1),
      headers: clientCreds,
    });
    expectError(over, 413, `request body is too large: at most ${DEFAULT_MAX_BODY_BYTES} bytes (64 KB)`);
  });

  test('the cap counts bytes, not characters', async () => {
    const body = JSON.stringify({ source: 'x', pad: 'é'.repeat(DEFAULT_MAX_BODY_BYTES / 2) });
    expect(body.length).toBeLessThan(DEFAULT_MAX_BODY_BYTES);
    const res = await send({ method: 'POST', target: '/test/no-such-test/run', body, headers: clientCreds });
    expectError(res, 413, /too large/);
  });

  test('a body the route ignores still counts against the cap (GET with 1 MB)', async () => {
    const res = await send({
      method: 'GET',
      target: '/run',
      body: 'x'.repeat(1024 * 1024),
      headers: clientCreds,
    });
    expectError(res, 413, /too large/);
  });

  test('over 10 MB the local server refuses at the transport, with or without credentials', async () => {
    const body = Buffer.alloc(10 * 1024 * 1024 + 1, 0x20);
    expectError(await send({ method: 'PUT', target: secretPath(), body }), 413, 'request body too large');
    expectError(
      await send({ method: 'PUT', target: secretPath(), body, headers: apiKey }),
      413,
      'request body too large',
    );
  }, 30_000);

  test('a body that is not UTF-8 is a 400, not read as replacement characters', async () => {
    const body = Buffer.concat([
      Buffer.from('{"value":"'),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from('"}'),
    ]);
    const res = await send({ method: 'PUT', target: secretPath(), body, headers: apiKey });
    expectError(res, 400, 'request body is not valid UTF-8');
  });

  test('a __proto__ member at any depth is a 400', async () => {
    const body = `{"items":[{"key":"A","value":"b","x":{"y":[{"__proto__":{"polluted":true}}]}}]}`;
    const res = await send({
      method: 'PUT',
      target: `/v1/preview/secrets/${appId}/web`,
      body,
      headers: apiKey,
    });
    expectError(res, 400, 'request body must not contain __proto__ members');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

const PROTO_NAMES = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf', '__defineGetter__'];

describe('Object property names as query keys and header names', () => {
  test('query keys that are Object property names are plain unknown keys (GET /run refuses them by name)', async () => {
    const query = PROTO_NAMES.map((n, i) => `${n}=${i}`).join('&');
    const res = await send({ method: 'GET', target: `/run?${query}&limit=2&limit=3`, headers: clientCreds });
    expectError(
      res,
      400,
      /^invalid query: unknown parameter "constructor", "toString", .* \(GET \/run takes /,
    );
    expectError(await send({ method: 'GET', target: `/run?${query}` }), 401);
    const test404 = await send({
      method: 'GET',
      target: `/test/nope?${query}&steps=true`,
      headers: clientCreds,
    });
    expectError(test404, 404, 'test not found');
  });

  test('a query value for a known key that is an Object property name is validated as usual', async () => {
    const res = await send({ method: 'GET', target: '/run?limit=constructor', headers: clientCreds });
    expectError(res, 400, /^invalid query: limit: /);
  });

  test('header names that are Object property names are headers like any other', async () => {
    const headers: [string, string][] = PROTO_NAMES.map((n) => [n, 'x']);
    const res = await send({
      method: 'GET',
      target: '/run',
      headers: [...headers, ...Object.entries(clientCreds)],
    });
    expect(res.status).toBe(200);
    expectError(await send({ method: 'GET', target: '/run', headers }), 401);
    // Repeated names, and a name that is also a credential header, spelt in two cases.
    const twice = await send({
      method: 'GET',
      target: '/run',
      headers: [...headers, ...headers, ['SVC-CLIENT-ID', 'pvc_nothing00'], ...Object.entries(clientCreds)],
    });
    expect(twice.status).toBe(200);
  });

  test('Lambda events carrying own __proto__/constructor headers and query keys (handler level)', async () => {
    const event = (extra: string) =>
      JSON.parse(`{
        "httpMethod": "GET", "path": "/run", "resource": "/run", "body": null, "isBase64Encoded": false,
        "pathParameters": null,
        "headers": {"__proto__": "x", "constructor": "y", "toString": "z", "Host": "api.example.com" ${extra}},
        "queryStringParameters": {"__proto__": "1", "constructor": "2", "hasOwnProperty": "3", "limit": "5"},
        "requestContext": {"domainName": "api.example.com", "stage": "v1"}
      }`) as APIGatewayProxyEvent;
    const creds = `, "svc-client-id": "${h.org.clientId}", "svc-client-secret": "${h.org.clientSecret}"`;
    // Own keys named like Object's properties are plain keys: GET /run names the first unknown one.
    const ok = await listRuns(event(creds), lambdaContext('listRuns', 'hardening-1'));
    expect(ok.statusCode).toBe(400);
    expect(JSON.parse(ok.body).error).toMatch(
      /^invalid query: unknown parameter "(__proto__|constructor|hasOwnProperty)"/,
    );
    const anonymous = await listRuns(event(''), lambdaContext('listRuns', 'hardening-2'));
    expect(anonymous.statusCode).toBe(401);
    expect(JSON.parse(anonymous.body)).toEqual({
      error:
        "missing or invalid credentials: this route takes an organization's client credentials in the svc-client-id and svc-client-secret headers",
    });
  });
});

describe('malformed Host, target and requests Node refuses', () => {
  test.each([
    ['a b', 'malformed Host header'],
    ['', 'malformed Host header'],
    ['[::', 'malformed Host header'],
    ['a/b', 'malformed Host header'],
    ['user@host', 'malformed Host header'],
    [null, 'missing Host header'],
  ])('Host %j is a 400 with or without credentials', async (host, message) => {
    expectError(await send({ method: 'GET', target: '/run', host }), 400, message);
    expectError(await send({ method: 'GET', target: '/run', host, headers: clientCreds }), 400, message);
    expectError(
      await send({ method: 'POST', target: '/test/x/run', host, headers: clientCreds, body: '{}' }),
      400,
      message,
    );
  });

  test('valid Host forms are accepted (name, IPv4, IPv6, with port)', async () => {
    for (const host of ['localhost', 'api.example.com:8443', '127.0.0.1:1', '[::1]:3000', '[::1]']) {
      const res = await send({ method: 'GET', target: '/run', host, headers: clientCreds });
      expect({ host, status: res.status }).toEqual({ host, status: 200 });
    }
  });

  test('a malformed Host in a Lambda event is a 400 (handler level)', async () => {
    const res = await startRun(
      {
        httpMethod: 'POST',
        path: '/test/t/run',
        resource: '/test/{test_id}/run',
        headers: { Host: 'a b', 'svc-client-id': h.org.clientId, 'svc-client-secret': h.org.clientSecret },
        body: null,
        isBase64Encoded: false,
        pathParameters: { test_id: 'no-such-test' },
        queryStringParameters: null,
        requestContext: { domainName: 'api.example.com' },
      } as unknown as APIGatewayProxyEvent,
      lambdaContext('startRun', 'hardening-3'),
    );
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ error: 'malformed Host header' });
  });

  test.each([
    ['a target that is not a path', { method: 'GET', target: '*' }, 400, 'malformed request target'],
    [
      'a //host/ target (no authority confusion)',
      { method: 'GET', target: '//evil.example/run' },
      404,
      'route not found',
    ],
    ['an unknown method', { method: 'BREW', target: '/run' }, 400, 'malformed HTTP request'],
    [
      'a header name with a space',
      { method: 'GET', target: '/run', headers: [['bad name', 'x']] as [string, string][] },
      400,
      'malformed HTTP request',
    ],
    [
      'headers over 16 KB',
      { method: 'GET', target: '/run', headers: [['x-big', 'a'.repeat(20_000)]] as [string, string][] },
      431,
      'request headers too large',
    ],
    [
      'a 20 KB path',
      { method: 'GET', target: `/run/${'a'.repeat(20_000)}` },
      431,
      'request headers too large',
    ],
    [
      'an unsupported Expect',
      { method: 'GET', target: '/run', headers: [['expect', 'teapot']] as [string, string][] },
      417,
      'unsupported Expect header',
    ],
  ])('%s is a 4xx with a JSON error', async (_label, req, status, message) => {
    expectError(await rawRequest(h.url, req), status, message);
  });
});

// A client that left in the middle of its body made the server log `local server error`.
test('a client that aborts mid-body is no server error: nothing logged, the server keeps answering', async () => {
  const { hostname, port } = new URL(h.url);
  const logged = h.logs.length;
  await new Promise<void>((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.write(
        `PUT ${secretPath()} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nauthorization: ${apiKey.authorization}\r\n` +
          'content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"value":"abc',
      );
      // Long enough for the server to be reading the body, then a reset (not a clean end).
      setTimeout(() => {
        socket.resetAndDestroy();
        resolve();
      }, 300);
    });
  });
  await new Promise((r) => setTimeout(r, 300));
  expect(h.logs.slice(logged).filter((l) => l.includes('local server error'))).toEqual([]);
  expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
});

test('nothing stored changed', async () => {
  expect(await snapshot(h.dataDir)).toEqual(before);
});
