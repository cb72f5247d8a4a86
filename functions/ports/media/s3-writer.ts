import type { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { MediaWriter } from './port.js';

/**
 * S3 media, written: screenshots and videos, through lib-storage's `Upload`: one PutObject for a body
 * within a part (5 MiB: every screenshot, most videos), a multipart upload of 5 MiB parts for a longer
 * video (aborted if a part fails, so no orphaned parts stay behind).
 */
export class S3MediaWriter implements MediaWriter {
  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
  ) {}

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    await new Upload({
      client: this.s3,
      params: { Bucket: this.bucket, Key: key, Body: body, ContentType: contentType },
    }).done();
  }
}
