import { config } from '../../shared/config.js';
import { GitHubAppCredentials } from '../source-host/github-app-secret.js';
import { once } from './adapters.js';
import { secretsManagerClient } from './aws-clients.js';

/** The GitHub App's credentials (its secret), once per container, for the ports that act as the App. */
export const githubAppCredentials = /* @__PURE__ */ once(
  () => new GitHubAppCredentials(secretsManagerClient(), config().github.appSecretArn),
);
