import { describe, expect, test } from '@jest/globals';
import {
  ConfigError,
  MalformedEvent,
  NotFoundError,
  publicMessage,
  statusOf,
  ValidationError,
} from './errors.js';

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

  test('MalformedEvent is named so (the local bus and the DLQ records go by it) and is no status of the API', () => {
    const err = new MalformedEvent(
      'event e1 (Preview Redeploy Requested): invalid detail: prNumber: required',
    );
    expect([err.name, err.message, `${err}`]).toEqual([
      'MalformedEvent',
      'event e1 (Preview Redeploy Requested): invalid detail: prNumber: required',
      'MalformedEvent: event e1 (Preview Redeploy Requested): invalid detail: prNumber: required',
    ]);
    expect(err).toBeInstanceOf(Error);
    expect([statusOf(err), publicMessage(err)]).toEqual([500, 'internal error']);
  });
});
