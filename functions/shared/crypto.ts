import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Length of a row id: as @paralleldrive/cuid2's default ids, which rows created before this held. */
export const ID_LENGTH = 24;
const LETTERS = 'abcdefghijklmnopqrstuvwxyz';
const BASE36 = `0123456789${LETTERS}`;

/** `count` characters drawn uniformly from `alphabet` with node:crypto (bytes past the last multiple dropped). */
function randomChars(count: number, alphabet: string): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < count) {
    for (const byte of randomBytes(count * 2)) {
      if (byte >= limit) continue;
      out += alphabet[byte % alphabet.length];
      if (out.length === count) break;
    }
  }
  return out;
}

/**
 * A new row id (applications, tests, runs, orgs, environments), CUID-shaped as the spec says: 24 characters
 * of lower-case base 36, the first a letter (never read as a number), the other 23 uniformly random from
 * node:crypto (about 119 bits: collisions are out of reach). It replaced @paralleldrive/cuid2, whose SHA-3
 * and big-number code weighed ~25 KB in every bundle; old and new ids have the same shape, and every
 * validator (`rowId` in validation.ts) accepts both.
 */
export const newId = (): string => randomChars(1, LETTERS) + randomChars(ID_LENGTH - 1, BASE36);

/**
 * A row id derived from `seed`, shaped as `newId`'s (a letter, then 23 base-36 characters, from its
 * SHA-256): the same seed, the same id. For a write that must happen once however often it is retried
 * (a retried task starting its runs), conditioned on the id being new.
 */
export function idFrom(seed: string): string {
  const bytes = hash('sha256', `row-id:${seed}`, 'buffer');
  let out = LETTERS[bytes[0]! % LETTERS.length]!;
  for (let i = 1; i < ID_LENGTH; i++) out += BASE36[bytes[i]! % BASE36.length];
  return out;
}

/** A high-entropy secret, base64url (256 bits by default). */
export const randomSecret = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/** SHA-256 of a string, hex (node:crypto's one-shot `hash`, Node 20.12+: no Hash object per call). */
export const sha256Hex = (value: string): string => hash('sha256', value, 'hex');

/**
 * Compare a presented secret with a stored SHA-256 digest (hex, or its bytes: what a cache keeps) in
 * constant time. Random 256-bit secrets need no slow KDF: a plain hash already makes the stored value
 * useless to a reader of the table.
 */
export function matchesHash(presented: string, stored: string | Buffer): boolean {
  const a = hash('sha256', presented, 'buffer');
  const b = typeof stored === 'string' ? Buffer.from(stored, 'hex') : stored;
  return b.length === a.length && timingSafeEqual(a, b);
}
