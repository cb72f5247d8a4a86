import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import * as z from 'zod';
import { route } from '../../functions/api/route.js';
import { ConflictError, ValidationError } from '../../functions/shared/errors.js';
import { lambdaContext } from '../../functions/shared/lambda-context.js';
import { setLogSink } from '../../functions/shared/log.js';
import { describeIssues } from '../../functions/shared/validation.js';

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
      body: JSON.stringify({ error: 'missing or invalid credentials' }),
    });
    expect(logs).toHaveLength(1);
    expect(JSON.parse(logs[0]!)).toMatchObject({
      message: 'request',
      route: 'getEnvironment',
      status: 401,
      requestId: 'req-1',
    });
  });

  test('a required body that is empty or malformed is a 400 before authentication', async () => {
    const { handler } = route('putSecrets', { body: z.object({}), bodyRequired: true }, async () => ({
      statusCode: 200,
      body: {},
    }));
    const empty = await handler(event({ body: '  ' }), lambdaContext('t', 'r'));
    expect(JSON.parse(empty.body)).toEqual({ error: 'request body is required' });
    const broken = await handler(event({ body: '{"a":' }), lambdaContext('t', 'r'));
    expect(broken.statusCode).toBe(400);
    expect(JSON.parse(broken.body)).toEqual({ error: 'request body is not valid JSON' });
    const proto = await handler(event({ body: '{"a":[{"__proto__":{"x":1}}]}' }), lambdaContext('t', 'r'));
    expect(proto.statusCode).toBe(400);
    expect(JSON.parse(proto.body)).toEqual({ error: 'request body must not contain __proto__ members' });
  });

  test('the raw main function is exported for tests', async () => {
    const { main } = route('getEnvironment', {}, async () => {
      throw new ConflictError('nope');
    });
    await expect(main({} as never)).rejects.toBeInstanceOf(ConflictError);
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
