import { AwsJsonClient, SECRETS_MANAGER } from '../../shared/aws-json.js';
import { config } from '../../shared/config.js';
import { SecretsManagerStore } from '../secret-store/secrets-manager.js';
import { adapter } from './adapters.js';

/** Secret bundles (AWS: Secrets Manager under SECRET_NAME_PREFIX; its client created with the adapter). */
export const secretStore = /* @__PURE__ */ adapter(
  'secrets',
  () =>
    new SecretsManagerStore(
      new AwsJsonClient(SECRETS_MANAGER, { region: config().region }),
      config().secretNamePrefix,
    ),
);
