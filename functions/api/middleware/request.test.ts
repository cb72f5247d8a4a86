import { describe, expect, test } from '@jest/globals';
import { apiEvent } from '../../../test/support/middy-request.js';
import { headersOf } from './request.js';

describe('headersOf', () => {
  test('lower-cases header names and keeps their values as sent', () => {
    const headers = headersOf(
      apiEvent({ headers: { Host: 'api.example.com', 'X-Forwarded-Proto': 'HTTP' } }),
    );
    expect({ ...headers }).toEqual({ host: 'api.example.com', 'x-forwarded-proto': 'HTTP' });
  });

  test('is a null-prototype object: `constructor` and `__proto__` headers are data, nothing is inherited', () => {
    const headers = headersOf(apiEvent({ headers: JSON.parse('{"__proto__":"a","Constructor":"b"}') }));
    expect(Object.getPrototypeOf(headers)).toBeNull();
    expect(Object.entries(headers).sort()).toEqual([
      ['__proto__', 'a'],
      ['constructor', 'b'],
    ]);
    expect(headers.constructor).toBe('b');
    expect(headersOf(apiEvent()).toString).toBeUndefined();
  });

  test('skips headers without a string value and reads no headers at all as none', () => {
    const headers = headersOf(apiEvent({ headers: { A: 'x', B: undefined } }));
    expect(Object.keys(headers)).toEqual(['a']);
    expect(Object.keys(headersOf(apiEvent({ headers: null as never })))).toEqual([]);
  });
});
