import { describe, expect, test } from '@jest/globals';
import * as z from 'zod/mini';
import { describeIssues, reservedMemberPath } from './validation.js';

describe('reservedMemberPath', () => {
  test('finds an own __proto__ member at any depth, without recursion', () => {
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
});

describe('describeIssues', () => {
  test('names the path of each problem', () => {
    const r = z.object({ items: z.array(z.object({ key: z.string() })) }).safeParse({ items: [{ key: 1 }] });
    expect(r.success).toBe(false);
    if (!r.success)
      expect(describeIssues('request body', r.error)).toMatch(/^invalid request body: items\[0\]\.key: /);
  });
});
