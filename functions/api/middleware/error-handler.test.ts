import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { middyRequest } from '../../../test/support/middy-request.js';
import {
  AlreadyExistsError,
  ConfigError,
  ConflictError,
  PayloadTooLargeError,
  TooManyRequestsError,
  UnauthorizedError,
  ValidationError,
} from '../../shared/errors.js';
import { setLogSink } from '../../shared/log.js';
import { errorHandler } from './error-handler.js';

const logs: Record<string, unknown>[] = [];
beforeAll(() => setLogSink((l) => logs.push(JSON.parse(l))));
afterEach(() => {
  logs.length = 0;
});

/** The response the error handler makes of `error`, its body parsed. */
async function answer(error: Error) {
  const request = middyRequest();
  request.error = error;
  await errorHandler().onError!(request);
  const res = request.response!;
  return { status: res.statusCode, headers: res.headers, body: JSON.parse(res.body) };
}

describe('errorHandler', () => {
  test.each([
    [new ValidationError('invalid path: env_key: too short'), 400],
    [new UnauthorizedError(), 401],
    [new ConflictError('environment is being torn down'), 409],
    [new PayloadTooLargeError('request body is too large'), 413],
  ])('a typed error (%p) is its status with its message as the error body', async (error, status) => {
    expect(await answer(error)).toEqual({
      status,
      headers: { 'content-type': 'application/json' },
      body: { error: error.message },
    });
    expect(logs).toEqual([]);
  });

  test('a 409 of an object that exists names it', async () => {
    expect((await answer(new AlreadyExistsError('application exists', 'app_1'))).body).toEqual({
      error: 'application exists',
      existingId: 'app_1',
    });
  });

  test('a 429 says when to come back (Retry-After)', async () => {
    expect(await answer(new TooManyRequestsError('slow down', 7))).toEqual({
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after': '7' },
      body: { error: 'slow down' },
    });
  });

  test('an unexpected error is a generic 500; its message reaches neither the caller nor the log', async () => {
    const error = new TypeError('token=s3cr3t-value');
    expect(await answer(error)).toEqual({
      status: 500,
      headers: { 'content-type': 'application/json' },
      body: { error: 'internal error' },
    });
    expect(logs).toEqual([
      expect.objectContaining({
        level: 'error',
        message: 'unhandled error',
        requestId: 'req-1',
        name: 'TypeError',
        stack: expect.stringContaining('error-handler.test'),
      }),
    ]);
    expect(logs[0]).not.toHaveProperty('detail');
    expect(JSON.stringify(logs)).not.toContain('s3cr3t');
  });

  test('a ConfigError is a 500 whose message (ours: the bad variables) is logged for operators', async () => {
    const res = await answer(new ConfigError('invalid configuration: PREVIEW_TABLE_PREFIX: required'));
    expect(res).toMatchObject({ status: 500, body: { error: 'internal error' } });
    expect(logs[0]).toMatchObject({
      name: 'ConfigError',
      detail: 'invalid configuration: PREVIEW_TABLE_PREFIX: required',
    });
  });
});
