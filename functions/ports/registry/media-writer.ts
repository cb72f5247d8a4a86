import { config } from '../../shared/config.js';
import type { MediaWriter } from '../media/port.js';
import { S3MediaWriter } from '../media/s3-writer.js';
import { adapter, required } from './adapters.js';
import { s3Client } from './aws-clients.js';

/**
 * Test-run media, written: screenshots and videos (AWS: uploads into the media bucket through the S3
 * client, no link key). The reading half is `media.ts`. Locally both are the one local media store.
 */
export const mediaWriter = /* @__PURE__ */ adapter<'media', MediaWriter>(
  'media',
  () => new S3MediaWriter(s3Client(), required(config().runs.mediaBucket, 'MEDIA_BUCKET')),
);
