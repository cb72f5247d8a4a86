import { config } from '../../shared/config.js';
import { SecretsManagerStore } from '../secret-store/secrets-manager.js';
import { adapter } from './adapters.js';
import { secretsManagerClient } from './aws-clients.js';

/** Secret bundles (AWS: Secrets Manager under SECRET_NAME_PREFIX; the container’s Secrets Manager client). */
export const secretStore = /* @__PURE__ */ adapter(
  'secrets',
  () => new SecretsManagerStore(secretsManagerClient(), config().secretNamePrefix),
);
