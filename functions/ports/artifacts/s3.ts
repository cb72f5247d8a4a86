import type { Readable } from 'node:stream';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { isAwsError } from '../../shared/aws/aws-errors.js';
import type { Artifacts } from './port.js';

/**
 * S3 artifacts: objects in the artifacts bucket (private, encrypted, expiring by lifecycle rule; see the
 * stack). A stream of unknown length goes up through lib-storage's `Upload`: one PutObject when it ends
 * within a part (5 MiB), else a multipart upload of 5 MiB parts (at most `queueSize` in memory and in
 * flight at once), aborted if the stream or a part fails, so an archive of any size fits in a Lambda.
 */
export class S3Artifacts implements Artifacts {
  constructor(
    private readonly s3: S3Client,
    readonly bucket: string,
    /** Parts in flight at once (lib-storage's default: 4, so about 20 MiB of memory at most). */
    private readonly queueSize = 4,
  ) {}

  location(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  async exists(key: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (err) {
      // A HEAD answer has no body: S3's 404 is `NotFound` (a 403 without s3:ListBucket; the stack grants it).
      if (isAwsError(err, 'NotFound', 'NoSuchKey')) return false;
      throw err;
    }
  }

  async put(key: string, body: Readable, contentType: string): Promise<void> {
    await new Upload({
      client: this.s3,
      params: { Bucket: this.bucket, Key: key, Body: body, ContentType: contentType },
      queueSize: this.queueSize,
    }).done();
  }
}
