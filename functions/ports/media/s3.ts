import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { NodeSha256 } from '../../shared/sha256.js';
import { type LinkCheck, MEDIA_URL_TTL_SECONDS, type MediaStore } from './port.js';
import { checkSignedQuery, encodeKey, signedQuery } from './signing.js';

/**
 * S3 media: objects in the media bucket (private, encrypted, expiring by a lifecycle rule: see the stack),
 * read through presigned GET URLs minted on each read and valid `MEDIA_URL_TTL_SECONDS` (SigV4 query
 * signing, as @aws-sdk/s3-request-presigner does it: unsigned payload, `host` the only signed header).
 * Report links are HMAC-signed with a key the stack keeps in Secrets Manager (`linkKey` loads it once).
 *
 * A presigned URL is also bounded by the credentials that signed it: the Lambda role's session outlives
 * an hour, so the hour holds.
 */
export class S3MediaStore implements MediaStore {
  private key: Promise<Buffer> | undefined;
  now: () => number;

  constructor(
    private readonly client: S3Client,
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

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }),
    );
  }

  async url(key: string, _baseUrl: string): Promise<string> {
    const config = this.client.config;
    const region = await config.region();
    // A custom endpoint (an S3-compatible store, the test fake) is addressed path-style; AWS virtual-hosted.
    const custom = config.endpoint ? await config.endpoint() : undefined;
    const protocol = custom?.protocol ?? 'https:';
    const hostname = custom?.hostname ?? `${this.bucket}.s3.${region}.amazonaws.com`;
    const port = custom?.port;
    const path = custom
      ? `${(custom.path ?? '').replace(/\/+$/, '')}/${this.bucket}/${encodeKey(key)}`
      : `/${encodeKey(key)}`;
    const host = port ? `${hostname}:${port}` : hostname;
    const signer = new SignatureV4({
      credentials: config.credentials,
      region,
      service: 's3',
      sha256: NodeSha256,
      uriEscapePath: false,
      applyChecksum: false,
    });
    const signed = await signer.presign(
      {
        method: 'GET',
        protocol,
        hostname,
        port,
        path,
        query: {},
        headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
      },
      { expiresIn: MEDIA_URL_TTL_SECONDS, signingDate: new Date(this.now()) },
    );
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(signed.query ?? {}))
      for (const value of Array.isArray(v) ? v : [v]) if (value != null) query.append(k, value);
    return `${protocol}//${host}${path}?${query.toString()}`;
  }

  async signLink(path: string, ttlSeconds: number): Promise<string> {
    return signedQuery(await this.linkKey(), path, ttlSeconds, this.now());
  }

  async checkLink(path: string, expires: string | undefined, sig: string | undefined): Promise<LinkCheck> {
    return checkSignedQuery(await this.linkKey(), path, expires, sig, this.now());
  }
}
