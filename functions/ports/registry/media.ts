import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import type { MediaReader } from '../media/port.js';
import { S3MediaReader } from '../media/s3.js';
import { adapter, required } from './adapters.js';
import { s3Client, secretsManagerClient } from './aws-clients.js';

/**
 * Test-run media, read: media URLs and report links (AWS: presigned GETs of the media bucket, minted by
 * the S3 client's presigner; the link key in Secrets Manager). The writing half is `media-writer.ts`, so
 * that read-side routes carry nothing that writes. Locally both are the one local media store.
 */
export const mediaReader = /* @__PURE__ */ adapter<'media', MediaReader>('media', () => {
  const c = config();
  const secretArn = required(c.runs.linkSecretArn, 'RUN_LINK_SECRET_ARN');
  return new S3MediaReader(s3Client(), required(c.runs.mediaBucket, 'MEDIA_BUCKET'), async () => {
    const { SecretString: secret } = await secretsManagerClient().send(
      new GetSecretValueCommand({ SecretId: secretArn }),
    );
    if (!secret) throw new ConfigError('the run-link signing secret is empty');
    return Buffer.from(secret, 'utf8');
  });
});
