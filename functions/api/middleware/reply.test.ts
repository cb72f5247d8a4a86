import { expect, test } from '@jest/globals';
import { json } from './reply.js';

test('JSON answers end with a newline (a shell prompt does not run into them)', () => {
  const res = json(200, { a: 1 });
  expect(res.body).toBe('{"a":1}\n');
  expect(JSON.parse(res.body)).toEqual({ a: 1 });
});

test('a JSON answer carries its status and says it is JSON', () => {
  expect(json(404, { error: 'no such thing' })).toEqual({
    statusCode: 404,
    headers: { 'content-type': 'application/json' },
    body: '{"error":"no such thing"}\n',
  });
});
