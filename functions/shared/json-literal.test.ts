import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { ValidationError } from './errors.js';
import { jsonInteger, topLevelLiteral } from './json-literal.js';

describe('topLevelLiteral', () => {
  test.each([
    ['{"version":1}', '1'],
    ['{ "version" : 1.0 , "x": 2}', '1.0'],
    ['{"a":{"version":2},"version":1e0}', '1e0'],
    ['{"a":"\\"version\\":3","version":"1"}', '"1"'],
    ['{"a":[{"version":9}],"version":-0}', '-0'],
    ['{"version":1,"version":2.5}', '2.5'],
  ])('%s → %s', (raw, literal) => {
    expect(topLevelLiteral(raw, 'version')).toBe(literal);
  });

  test('absent member or non-object document', () => {
    expect(topLevelLiteral('{"other":1}', 'version')).toBeUndefined();
    expect(topLevelLiteral('[{"version":1}]', 'version')).toBeUndefined();
    expect(topLevelLiteral('1', 'version')).toBeUndefined();
  });

  test('agrees with JSON.parse on the value of any top-level member (property)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.string(), (obj, key) => {
        const raw = JSON.stringify(obj, null, 1);
        const literal = topLevelLiteral(raw, key);
        if (Object.hasOwn(obj, key))
          expect(JSON.parse(literal!)).toEqual(JSON.parse(JSON.stringify(obj[key])));
        else expect(literal).toBeUndefined();
      }),
    );
  });
});

describe('jsonInteger', () => {
  test.each(['1', '0', '-3', '12345'])('accepts %s', (n) => {
    expect(() => jsonInteger(`{"n":${n}}`, 'n')).not.toThrow();
  });
  test.each(['1.0', '1e0', '1E2', '-0.5', '2.50'])('rejects %s', (n) => {
    expect(() => jsonInteger(`{"n":${n}}`, 'n')).toThrow(ValidationError);
  });
  test('leaves non-numbers to the schema', () => {
    expect(() => jsonInteger('{"n":"1.0"}', 'n')).not.toThrow();
    expect(() => jsonInteger(undefined, 'n')).not.toThrow();
  });
});
