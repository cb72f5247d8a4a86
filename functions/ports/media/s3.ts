import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { type LinkCheck, MEDIA_URL_TTL_SECONDS, type MediaReader } from './port.js';
import { checkSignedQuery, signedQuery } from './signing.js';

/**
 * S3 media, read: objects in the media bucket (private, encrypted, expiring by a lifecycle rule: see the
 * stack) are opened through presigned GET URLs minted on each read and valid `MEDIA_URL_TTL_SECONDS`
 * (`getSignedUrl` of @aws-sdk/s3-request-presigner: SigV4 query signing with the client's region,
 * credentials and endpoint; no request is sent). Report links are HMAC-signed with a key the stack keeps
 * in Secrets Manager (`loadLinkKey` loads it once).
 *
 * A presigned URL is also bounded by the credentials that signed it: the Lambda role's session outlives
 * an hour, so the hour holds. The writing half is `s3-writer.ts`, so that read-side bundles carry no
 * upload code.
 */
export class S3MediaReader implements MediaReader {
  private key: Promise<Buffer> | undefined;
  now: () => number;

  constructor(
    private readonly s3: S3Client,
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
    return getSignedUrl(this.s3, new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
      expiresIn: MEDIA_URL_TTL_SECONDS,
      signingDate: new Date(this.now()),
    });
  }

  async signLink(path: string, ttlSeconds: number): Promise<string> {
    return signedQuery(await this.linkKey(), path, ttlSeconds, this.now());
  }

  async checkLink(path: string, expires: string | undefined, sig: string | undefined): Promise<LinkCheck> {
    return checkSignedQuery(await this.linkKey(), path, expires, sig, this.now());
  }
}
