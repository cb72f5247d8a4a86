import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { config } from '../../shared/config.js';
import { SecretsManagerStore } from '../secret-store/secrets-manager.js';
import { adapter } from './adapters.js';

/** Secret bundles (AWS: Secrets Manager under SECRET_NAME_PREFIX). */
export const secretStore = /* @__PURE__ */ adapter(
  'secrets',
  () =>
    new SecretsManagerStore(new SecretsManagerClient({ region: config().region }), config().secretNamePrefix),
);
