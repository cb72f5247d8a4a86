import { describe, expect, test } from '@jest/globals';
import { ID_LENGTH, idFrom, newId } from './crypto.js';
import { rowId } from './validation.js';

/** The shape of a @paralleldrive/cuid2 id (the generator before this one): rows still hold them. */
const CUID_SHAPE = /^[a-z][0-9a-z]{23}$/;
/** Two ids cuid2 generated, as rows created before the change hold them. */
const OLD_IDS = ['r3u2q2duy2s7dp1xpu6rr1nx', 'mnmchx2h0vlqrv242xmrxnsh'];

describe('newId (CUID-shaped row ids from node:crypto)', () => {
  test('is 24 characters of lower-case base 36, the first a letter: the shape of the old ids', () => {
    for (const old of OLD_IDS) expect(old).toMatch(CUID_SHAPE);
    for (let i = 0; i < 2000; i++) {
      const id = newId();
      expect(id).toHaveLength(ID_LENGTH);
      expect(id).toMatch(CUID_SHAPE);
    }
  });

  test('every id validator accepts old and new ids alike', () => {
    for (const id of [...OLD_IDS, newId(), newId()]) expect(rowId.safeParse(id).success).toBe(true);
  });

  test('does not repeat, and uses every character about evenly (no modulo bias)', () => {
    const ids = Array.from({ length: 20000 }, newId);
    expect(new Set(ids).size).toBe(ids.length);
    const first = new Map<string, number>();
    const rest = new Map<string, number>();
    for (const id of ids) {
      first.set(id[0]!, (first.get(id[0]!) ?? 0) + 1);
      for (const c of id.slice(1)) rest.set(c, (rest.get(c) ?? 0) + 1);
    }
    expect(first.size).toBe(26);
    expect(rest.size).toBe(36);
    // 20000 / 26 ≈ 769 per letter and 20000 × 23 / 36 ≈ 12778 per character: a biased draw (e.g. digits
    // twice as likely) lands far outside ±15% / ±5%; a uniform one stays inside with overwhelming odds.
    for (const n of first.values()) expect(Math.abs(n / (20000 / 26) - 1)).toBeLessThan(0.15);
    for (const n of rest.values()) expect(Math.abs(n / ((20000 * 23) / 36) - 1)).toBeLessThan(0.05);
  });
});

describe('idFrom (a row id derived from a seed)', () => {
  test('the same seed, the same id; another seed, another; shaped as newId, accepted as a row id', () => {
    const id = idFrom('org-1:acme/web#7@abc#3:test-1');
    expect(idFrom('org-1:acme/web#7@abc#3:test-1')).toBe(id);
    expect(idFrom('org-1:acme/web#7@abc#4:test-1')).not.toBe(id);
    expect(id).toMatch(CUID_SHAPE);
    expect(rowId.safeParse(id).success).toBe(true);
    // Unlike the seed: it is hashed, not spelled out.
    expect(id).not.toContain('org');
  });
});
