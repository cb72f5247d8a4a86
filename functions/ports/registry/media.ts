import { config } from '../../shared/config.js';
import type { MediaReader } from '../media/port.js';
import { S3MediaReader } from '../media/s3.js';
import { adapter, required } from './adapters.js';
import { s3Client } from './aws-clients.js';
import { runLinkKey } from './link-signer.js';

/**
 * Test-run media, read: media URLs and report links (AWS: presigned GETs of the media bucket, minted by
 * the S3 client's presigner; the link key in Secrets Manager). The writing half is `media-writer.ts`, so
 * that read-side routes carry nothing that writes; `link-signer.ts` signs report links alone, with no S3.
 * Locally all three are the one local media store.
 */
export const mediaReader = /* @__PURE__ */ adapter<'media', MediaReader>('media', () => {
  const c = config();
  required(c.runs.linkSecretArn, 'RUN_LINK_SECRET_ARN');
  return new S3MediaReader(s3Client(), required(c.runs.mediaBucket, 'MEDIA_BUCKET'), runLinkKey);
});
