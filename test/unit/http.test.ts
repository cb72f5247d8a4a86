import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import * as z from 'zod/mini';
import { jsonDepthExceeds, MAX_JSON_DEPTH, route } from '../../functions/api/route.js';
import { MAX_RECIPES_FILE_BYTES } from '../../functions/core/recipes/versions.js';
import { routes } from '../../functions/manifest/routes.js';
import { ConflictError, ValidationError } from '../../functions/shared/errors.js';
import { lambdaContext } from '../../functions/shared/lambda-context.js';
import { setLogSink } from '../../functions/shared/log.js';
import { describeIssues, reservedMemberPath } from '../../functions/shared/validation.js';

// The middleware stack without a database: the routes below fail before or without authentication.
const event = (over: Partial<APIGatewayProxyEvent> = {}): APIGatewayProxyEvent =>
  ({
    headers: {},
    body: null,
    pathParameters: null,
    queryStringParameters: null,
    requestContext: {},
    ...over,
  }) as APIGatewayProxyEvent;

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

  // Issue 26: a 401 says which credential the route takes (and nothing about what was presented).
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

  // Issue 8, finding 5: the body was parsed (and its __proto__ guard recursed) before authentication, so
  // a deep body overflowed the stack (500) and a malformed one was a 400, to callers without credentials.
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

describe('body guards', () => {
  test('jsonDepthExceeds counts arrays and objects, not brackets inside strings', () => {
    expect(jsonDepthExceeds('{"a":[1,{"b":[]}]}', 4)).toBe(false);
    expect(jsonDepthExceeds('{"a":[1,{"b":[]}]}', 3)).toBe(true);
    expect(jsonDepthExceeds(`{"s":"${'['.repeat(1000)}\\"${'{'.repeat(1000)}"}`, 1)).toBe(false);
    expect(jsonDepthExceeds('['.repeat(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthExceeds('['.repeat(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds('['.repeat(1_000_000), MAX_JSON_DEPTH)).toBe(true);
  });

  test('reservedMemberPath finds an own __proto__ member at any depth, without recursion', () => {
    let deep: unknown = JSON.parse('{"__proto__":1}');
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(reservedMemberPath(deep)).toHaveLength(200_001);
    let clean: unknown = { constructor: 1, toString: 2 };
    for (let i = 0; i < 200_000; i++) clean = { a: clean };
    expect(reservedMemberPath(clean)).toBeUndefined();
    expect(reservedMemberPath({ a: '__proto__', b: ['__proto__'] })).toBeUndefined();
    expect(reservedMemberPath(JSON.parse('{"a":[{"b":1},{"c":{"__proto__":{}}}]}'))).toEqual([
      'a',
      1,
      'c',
      '__proto__',
    ]);
  });

  test("the recipe route's body cap is the recipe file limit of the use case", () => {
    expect(routes.createRecipeVersion.maxBodyBytes).toBe(MAX_RECIPES_FILE_BYTES);
  });
});

describe('describeIssues', () => {
  test('names the path of each problem', () => {
    const r = z.object({ items: z.array(z.object({ key: z.string() })) }).safeParse({ items: [{ key: 1 }] });
    expect(r.success).toBe(false);
    if (!r.success)
      expect(describeIssues('request body', r.error)).toMatch(/^invalid request body: items\[0\]\.key: /);
  });

  test('ValidationError is a 400', () => {
    expect(new ValidationError('x').statusCode).toBe(400);
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
