import { config } from '../../shared/config.js';
import { S3Objects, s3TargetFromEnv } from '../../shared/s3-objects.js';
import type { MediaWriter } from '../media/port.js';
import { S3MediaWriter } from '../media/s3.js';
import { adapter, required } from './adapters.js';

/**
 * Test-run media, written: screenshots and videos (AWS: PutObject into the media bucket, no S3 client and
 * no link key). The reading half is `media.ts`. Locally both are the one local media store.
 */
export const mediaWriter = /* @__PURE__ */ adapter<'media', MediaWriter>('media', () => {
  const c = config();
  return new S3MediaWriter(
    new S3Objects(s3TargetFromEnv(c.region), required(c.runs.mediaBucket, 'MEDIA_BUCKET')),
  );
});
