import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import type { LinkSigner } from '../media/port.js';
import { KeyLinkSigner } from '../media/signing.js';
import { adapter, required } from './adapters.js';
import { secretsManagerClient } from './aws-clients.js';

/** The run-link signing key (AWS: the secret RUN_LINK_SECRET_ARN names), as `media.ts` reads it too. */
export async function runLinkKey(): Promise<Buffer> {
  const secretArn = required(config().runs.linkSecretArn, 'RUN_LINK_SECRET_ARN');
  const { SecretString: secret } = await secretsManagerClient().send(
    new GetSecretValueCommand({ SecretId: secretArn }),
  );
  if (!secret) throw new ConfigError('the run-link signing secret is empty');
  return Buffer.from(secret, 'utf8');
}

/**
 * Report links only (AWS: the link key, no S3 client and no presigner): what the functions that bring
 * the merge gate need. Locally the one local media store, as every media getter.
 */
export const linkSigner = /* @__PURE__ */ adapter<'media', LinkSigner>(
  'media',
  () => new KeyLinkSigner(runLinkKey),
);
