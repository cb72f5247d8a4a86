import { createHash, createHmac } from 'node:crypto';

/**
 * SigV4 by hand, as AWS documents it, for tests that check what a signer made (the presigned media URLs of
 * the S3 presigner) without trusting the signer that made them.
 */

/** SigV4's UriEncode (RFC 3986): `encodeURIComponent` plus `!'()*`. */
export const uriEncode = (s: string): string =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The canonical query string: every parameter but `omit`, encoded, sorted by name. */
export function canonicalQuery(params: URLSearchParams, omit: readonly string[] = []): string {
  return [...params]
    .filter(([k]) => !omit.includes(k))
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

export const sha256Hex = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

/** The signature of a canonical request (and the credential scope it was signed in). */
export function sigv4Signature(o: {
  canonicalRequest: string;
  amzDate: string;
  region: string;
  service: string;
  secretAccessKey: string;
}): { signature: string; scope: string } {
  const scope = `${o.amzDate.slice(0, 8)}/${o.region}/${o.service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', o.amzDate, scope, sha256Hex(o.canonicalRequest)].join('\n');
  const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
  let key: Buffer = hmac(`AWS4${o.secretAccessKey}`, o.amzDate.slice(0, 8));
  for (const part of [o.region, o.service, 'aws4_request']) key = hmac(key, part);
  return { signature: createHmac('sha256', key).update(stringToSign).digest('hex'), scope };
}
