import { expect, test } from '@jest/globals';
import { json } from '../../functions/api/route.js';

test('JSON answers end with a newline (a shell prompt does not run into them)', () => {
  const res = json(200, { a: 1 });
  expect(res.body).toBe('{"a":1}\n');
  expect(JSON.parse(res.body)).toEqual({ a: 1 });
});
