import { describe, expect, test } from '@jest/globals';
import { ConfigError, NotFoundError, publicMessage, statusOf, ValidationError } from './errors.js';

describe('typed errors', () => {
  test('ValidationError is a 400', () => {
    expect(new ValidationError('x').statusCode).toBe(400);
  });

  test('statusOf and publicMessage: an AppError its own, anything else a 500 that says nothing', () => {
    expect([
      statusOf(new NotFoundError('no such run')),
      publicMessage(new NotFoundError('no such run')),
    ]).toEqual([404, 'no such run']);
    for (const err of [new Error('token=abc'), new ConfigError('invalid configuration: X'), 'thrown text'])
      expect([statusOf(err), publicMessage(err)]).toEqual([500, 'internal error']);
  });
});
