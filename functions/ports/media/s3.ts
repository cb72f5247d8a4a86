import { presignGet, type S3Objects, type S3Target } from '../../shared/s3-objects.js';
import { type LinkCheck, MEDIA_URL_TTL_SECONDS, type MediaReader, type MediaWriter } from './port.js';
import { checkSignedQuery, signedQuery } from './signing.js';

/**
 * S3 media, read: objects in the media bucket (private, encrypted, expiring by a lifecycle rule: see the
 * stack) are opened through presigned GET URLs minted on each read and valid `MEDIA_URL_TTL_SECONDS`
 * (SigV4 query signing, shared/s3-objects.ts). Report links are HMAC-signed with a key the stack keeps in
 * Secrets Manager (`loadLinkKey` loads it once). No S3 client: presigning needs only the region, the
 * credentials and the optional custom endpoint (`S3Target`).
 *
 * A presigned URL is also bounded by the credentials that signed it: the Lambda role's session outlives
 * an hour, so the hour holds.
 */
export class S3MediaReader implements MediaReader {
  private key: Promise<Buffer> | undefined;
  now: () => number;

  constructor(
    private readonly target: S3Target,
    private readonly bucket: string,
    private readonly loadLinkKey: () => Promise<Buffer>,
    opts: { now?: () => number } = {},
  ) {
    this.now = opts.now ?? Date.now;
  }

  private linkKey(): Promise<Buffer> {
    this.key ??= this.loadLinkKey().catch((err) => {
      this.key = undefined;
      throw err;
    });
    return this.key;
  }

  async url(key: string, _baseUrl: string): Promise<string> {
    return presignGet(this.target, this.bucket, key, MEDIA_URL_TTL_SECONDS, this.now());
  }

  async signLink(path: string, ttlSeconds: number): Promise<string> {
    return signedQuery(await this.linkKey(), path, ttlSeconds, this.now());
  }

  async checkLink(path: string, expires: string | undefined, sig: string | undefined): Promise<LinkCheck> {
    return checkSignedQuery(await this.linkKey(), path, expires, sig, this.now());
  }
}

/** S3 media, written: each screenshot and video is one PutObject of a bounded body (no multipart). */
export class S3MediaWriter implements MediaWriter {
  constructor(private readonly objects: S3Objects) {}

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    await this.objects.put(key, body, contentType);
  }
}
