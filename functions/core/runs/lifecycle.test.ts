import { describe, expect, test } from '@jest/globals';
import { resolveVariables } from './lifecycle.js';

describe('resolveVariables', () => {
  test('overrides saved names and ignores the rest', () => {
    expect(resolveVariables({ A: '1', B: '2' }, { B: 'x', C: 'y' })).toEqual({ A: '1', B: 'x' });
  });
  test('inherited names are neither overrides nor saved variables', () => {
    const saved = { toString: 'saved', A: '1' };
    expect(resolveVariables(saved, {})).toEqual({ toString: 'saved', A: '1' });
    expect(resolveVariables({ A: '1' }, JSON.parse('{"__proto__":"x","constructor":"y"}'))).toEqual({
      A: '1',
    });
  });
  test('an empty string is a real override', () => {
    expect(resolveVariables({ A: '1' }, { A: '' })).toEqual({ A: '' });
  });
});
