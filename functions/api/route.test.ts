import { createHmac } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import * as z from 'zod/mini';
import { apiEvent as event } from '../../test/support/middy-request.js';
import { routes } from '../manifest/routes.js';
import { lambdaContext } from '../shared/aws/lambda-context.js';
import { ConflictError } from '../shared/errors.js';
import { setLogSink } from '../shared/log.js';
import { MAX_JSON_DEPTH, route } from './route.js';

// The middleware stack without a database: the routes below fail before or without authentication, or
// are GitHub's webhook route, whose signature is checked against a secret the test gives.

const logs: string[] = [];
beforeAll(() => setLogSink((l) => logs.push(l)));
afterEach(() => {
  logs.length = 0;
});

describe('route() middleware stack', () => {
  test('missing credentials are a 401 with an error body, logged as one line', async () => {
    const { handler } = route('getEnvironment', {}, async () => ({ statusCode: 200, body: {} }));
    const res = await handler(event(), lambdaContext('t', 'req-1'));
    expect(res).toEqual({
      statusCode: 401,
      headers: { 'content-type': 'application/json' },
      body: `${JSON.stringify({ error: 'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)' })}\n`,
    });
    expect(logs).toHaveLength(1);
    expect(JSON.parse(logs[0]!)).toMatchObject({
      message: 'request',
      route: 'getEnvironment',
      status: 401,
      requestId: 'req-1',
    });
  });

  // A 401 says which credential the route takes (and nothing about what was presented).
  test.each([
    [
      'getEnvironment',
      { 'svc-client-id': 'pvc_abcdefgh', 'svc-client-secret': 's' },
      'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    ],
    [
      'listRuns',
      { authorization: `Bearer pvk_abcdefgh_${'A'.repeat(43)}`, 'svc-client-id': 'not-a-client-id' },
      "missing or invalid credentials: this route takes an organization's client credentials in the svc-client-id and svc-client-secret headers",
    ],
    [
      'githubWebhook',
      { authorization: `Bearer pvk_abcdefgh_${'A'.repeat(43)}`, 'x-hub-signature-256': 'sha256=00' },
      "missing or invalid X-Hub-Signature-256: this route takes GitHub's signature of the body under the GitHub App's webhook secret",
    ],
  ] as const)('a 401 of %s names the credential it takes', async (id, headers, error) => {
    const { handler } = route(id, { webhookSecret: async () => 'whsec' }, async () => ({
      statusCode: 200,
      body: {},
    }));
    const res = await handler(event({ headers, body: '{}' }), lambdaContext('t', 'r'));
    expect({ status: res.statusCode, body: JSON.parse(res.body) }).toEqual({ status: 401, body: { error } });
  });

  // The body was once parsed (and its __proto__ guard recursed) before authentication, so a deep body
  // overflowed the stack (500) and a malformed one was a 400, to callers without credentials.
  test.each([
    ['empty', '  '],
    ['malformed', '{"a":'],
    ['100,000 levels deep', `${'['.repeat(100_000)}${']'.repeat(100_000)}`],
    [
      '10,000 levels deep around a __proto__',
      `${'{"a":'.repeat(10_000)}{"__proto__":1}${'}'.repeat(10_000)}`,
    ],
    ['with a __proto__ member', '{"a":[{"__proto__":{"x":1}}]}'],
    ['over the cap', JSON.stringify({ a: 'x'.repeat(300 * 1024) })],
  ])('without credentials a body %s is a 401: the body is read after authentication', async (_l, body) => {
    const { handler } = route('putSecrets', { body: z.object({}), bodyRequired: true }, async () => ({
      statusCode: 200,
      body: {},
    }));
    const res = await handler(event({ body }), lambdaContext('t', 'r'));
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body)).toEqual({
      error:
        'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    });
  });

  test('the raw main function is exported for tests', async () => {
    const { main } = route('getEnvironment', {}, async () => {
      throw new ConflictError('nope');
    });
    await expect(main({} as never)).rejects.toBeInstanceOf(ConflictError);
  });
});

describe('unexpected errors', () => {
  test('are a generic 500 whose message never reaches the caller or the log', async () => {
    const { handler } = route('getEnvironment', {}, async () => ({ statusCode: 200, body: {} }));
    // No table configuration in this process: authentication fails inside, with a ConfigError.
    const leaky = event({ headers: { Authorization: `Bearer pvk_abcdefgh_${'a'.repeat(43)}` } });
    const res = await handler(leaky, lambdaContext('t', 'r'));
    expect(res.statusCode).toBe(500);
    expect(JSON.parse(res.body)).toEqual({ error: 'internal error' });
    const line = logs.map((l) => JSON.parse(l)).find((l) => l.message === 'unhandled error');
    expect(line).toMatchObject({
      name: 'ConfigError',
      detail: expect.stringMatching(/^invalid configuration: /),
    });
    expect(logs.join('\n')).not.toContain('a'.repeat(43));
  });
});

describe('a signed webhook through the whole chain', () => {
  const secret = async () => 'whsec';
  const signed = (body: string, over: Parameters<typeof event>[0] = {}) =>
    event({
      body,
      ...over,
      headers: {
        'X-Hub-Signature-256': `sha256=${createHmac('sha256', 'whsec').update(body).digest('hex')}`,
        Host: 'api.example.com',
        ...over.headers,
      },
    });

  test('the handler gets the validated input and its reply is JSON with its extra headers', async () => {
    const seen: unknown[] = [];
    const { handler } = route(
      'githubWebhook',
      { webhookSecret: secret, body: z.object({ action: z.string() }), bodyRequired: true },
      async (req) => {
        seen.push({ body: req.body, principal: req.principal, baseUrl: req.baseUrl, rawBody: req.rawBody });
        return {
          statusCode: 202,
          body: { ok: true },
          headers: { link: '<x>', 'content-type': 'text/plain' },
        };
      },
    );
    const res = await handler(signed('{"action":"opened"}'), lambdaContext('t', 'r'));
    expect(res).toEqual({
      statusCode: 202,
      headers: { link: '<x>', 'content-type': 'application/json' },
      body: '{"ok":true}\n',
    });
    expect(seen).toEqual([
      {
        body: { action: 'opened' },
        principal: { orgId: '', githubWebhook: true },
        baseUrl: 'https://api.example.com',
        rawBody: '{"action":"opened"}',
      },
    ]);
    expect(JSON.parse(logs.at(-1)!)).toMatchObject({
      message: 'request',
      route: 'githubWebhook',
      status: 202,
    });
  });

  test('a reply with a content type and a string body is sent as it is', async () => {
    const { handler } = route('githubWebhook', { webhookSecret: secret }, async () => ({
      statusCode: 200,
      body: 'plain text',
      contentType: 'text/plain; charset=utf-8',
    }));
    expect(await handler(signed(''), lambdaContext('t', 'r'))).toEqual({
      statusCode: 200,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: 'plain text',
    });
  });

  test.each([
    ['over the cap', JSON.stringify({ a: 'x'.repeat(routes.githubWebhook.maxBodyBytes) }), 413, /too large/],
    ['not JSON', '{"action":', 400, /^request body is not valid JSON$/],
    [
      'nested too deeply',
      `${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}`,
      400,
      /deeply/,
    ],
    ['that breaks the schema', '{"action":1}', 400, /^invalid request body: action: /],
  ])('once authenticated, a body %s is refused before the handler runs', async (_l, body, status, error) => {
    let called = false;
    const { handler } = route(
      'githubWebhook',
      { webhookSecret: secret, body: z.object({ action: z.string() }) },
      async () => {
        called = true;
        return { statusCode: 202, body: {} };
      },
    );
    const res = await handler(signed(body), lambdaContext('t', 'r'));
    expect({ status: res.statusCode, called }).toEqual({ status, called: false });
    expect(JSON.parse(res.body).error).toMatch(error);
  });

  test('a malformed Host is a 400', async () => {
    const { handler } = route('githubWebhook', { webhookSecret: secret }, async () => ({
      statusCode: 202,
      body: {},
    }));
    const res = await handler(signed('{}', { headers: { Host: 'a b' } }), lambdaContext('t', 'r'));
    expect({ status: res.statusCode, body: JSON.parse(res.body) }).toEqual({
      status: 400,
      body: { error: 'malformed Host header' },
    });
  });
});
