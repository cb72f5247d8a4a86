import { S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import { S3MediaStore } from '../media/s3.js';
import { adapter, required } from './adapters.js';

/** Test-run media and report links (AWS: the media bucket; link key in Secrets Manager). */
export const mediaStore = /* @__PURE__ */ adapter('media', () => {
  const c = config();
  const secretArn = required(c.runs.linkSecretArn, 'RUN_LINK_SECRET_ARN');
  const secrets = new SecretsManagerClient({ region: c.region });
  return new S3MediaStore(
    new S3Client({ region: c.region }),
    required(c.runs.mediaBucket, 'MEDIA_BUCKET'),
    async () => {
      const out = await secrets.send(new GetSecretValueCommand({ SecretId: secretArn }));
      if (!out.SecretString) throw new ConfigError('the run-link signing secret is empty');
      return Buffer.from(out.SecretString, 'utf8');
    },
  );
});
