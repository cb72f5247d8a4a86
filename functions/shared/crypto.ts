import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createId } from '@paralleldrive/cuid2';

/** A new CUID (row ids of applications, tests, runs, orgs). */
export const newId = (): string => createId();

/** A high-entropy secret, base64url (256 bits by default). */
export const randomSecret = (bytes = 32): string => randomBytes(bytes).toString('base64url');

export const sha256Hex = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex');

/**
 * Compare a presented secret with a stored SHA-256 hex digest in constant time. Random 256-bit secrets
 * need no slow KDF: a plain hash already makes the stored value useless to a reader of the table.
 */
export function matchesHash(presented: string, storedHex: string): boolean {
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = Buffer.from(storedHex, 'hex');
  return b.length === a.length && timingSafeEqual(a, b);
}
