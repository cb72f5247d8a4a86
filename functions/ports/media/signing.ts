import { createHmac, timingSafeEqual } from 'node:crypto';
import type { LinkCheck } from './port.js';

/**
 * HMAC-signed links, shared by the media adapters: `sig` is the HMAC-SHA256 (base64url) of
 * `<path>\n<expires>` under the service's link key, so neither the path nor the expiry can be changed
 * without the key. A bad signature is refused before the expiry is looked at (a forged link learns
 * nothing from the answer).
 */
export function linkSignature(key: Buffer, path: string, expires: number): string {
  return createHmac('sha256', key).update(`${path}\n${expires}`, 'utf8').digest('base64url');
}

/** The query that opens `path` until `nowMs + ttlSeconds`. */
export function signedQuery(key: Buffer, path: string, ttlSeconds: number, nowMs: number): string {
  const expires = Math.floor(nowMs / 1000) + ttlSeconds;
  return `expires=${expires}&sig=${linkSignature(key, path, expires)}`;
}

export function checkSignedQuery(
  key: Buffer,
  path: string,
  expires: string | undefined,
  sig: string | undefined,
  nowMs: number,
): LinkCheck {
  if (!expires || !sig || !/^\d{1,12}$/.test(expires)) return 'forbidden';
  const expected = Buffer.from(linkSignature(key, path, Number(expires)));
  const given = Buffer.from(sig);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'forbidden';
  return Number(expires) * 1000 <= nowMs ? 'expired' : 'ok';
}

/** The content type of a media key, from its extension. */
export function mediaContentType(key: string): string {
  if (key.endsWith('.png')) return 'image/png';
  if (key.endsWith('.mp4')) return 'video/mp4';
  if (key.endsWith('.webm')) return 'video/webm';
  if (key.endsWith('.jpg') || key.endsWith('.jpeg')) return 'image/jpeg';
  if (key.endsWith('.zip')) return 'application/zip';
  return 'application/octet-stream';
}

/** A key as a URL path: each segment percent-encoded. */
export const encodeKey = (key: string): string => key.split('/').map(encodeURIComponent).join('/');

/**
 * Report links signed with a key loaded once (`loadKey`: in AWS the link secret; a failed load is tried
 * again on the next link). The LinkSigner of the functions that mint links and no media URL.
 */
export class KeyLinkSigner {
  private key: Promise<Buffer> | undefined;

  constructor(
    private readonly loadKey: () => Promise<Buffer>,
    private readonly now: () => number = Date.now,
  ) {}

  async signLink(path: string, ttlSeconds: number): Promise<string> {
    this.key ??= this.loadKey().catch((err) => {
      this.key = undefined;
      throw err;
    });
    return signedQuery(await this.key, path, ttlSeconds, this.now());
  }
}
