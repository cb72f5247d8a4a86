import type { Readable } from 'node:stream';
import { HeadObjectCommand, NotFound, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Artifacts } from './port.js';

/**
 * S3 artifacts: objects in the artifacts bucket (private, encrypted, expiring by lifecycle rule; see the
 * stack). A stream of unknown length goes up as a multipart upload (lib-storage), one part at a time in
 * memory, so an archive of any size fits in a Lambda.
 */
export class S3Artifacts implements Artifacts {
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  location(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  async exists(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (err) {
      if (err instanceof NotFound || (err as { name?: string }).name === 'NotFound') return false;
      throw err;
    }
  }

  async put(key: string, body: Readable, contentType: string): Promise<void> {
    await new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: body, ContentType: contentType },
      queueSize: 1,
    }).done();
  }
}
