import type { Readable } from 'node:stream';
import type { S3Objects } from '../../shared/s3-objects.js';
import type { Artifacts } from './port.js';

/**
 * S3 artifacts: objects in the artifacts bucket (private, encrypted, expiring by lifecycle rule; see the
 * stack). A stream of unknown length goes up as one PutObject when it fits in a part (5 MiB), else as a
 * multipart upload, one part at a time in memory, so an archive of any size fits in a Lambda
 * (shared/s3-objects.ts: SigV4 requests, no S3 client).
 */
export class S3Artifacts implements Artifacts {
  constructor(private readonly objects: S3Objects) {}

  location(key: string): string {
    return `s3://${this.objects.bucket}/${key}`;
  }

  async exists(key: string): Promise<boolean> {
    return this.objects.exists(key);
  }

  async put(key: string, body: Readable, contentType: string): Promise<void> {
    await this.objects.upload(key, body, contentType);
  }
}
