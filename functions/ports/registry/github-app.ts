import { SECRETS_MANAGER } from '../../shared/aws-json.js';
import { config } from '../../shared/config.js';
import { GitHubAppCredentials } from '../source-host/github-app.js';
import { once } from './adapters.js';
import { awsClient } from './aws-clients.js';

/** The GitHub App's credentials (its secret), once per container, for the ports that act as the App. */
export const githubAppCredentials = /* @__PURE__ */ once(
  () => new GitHubAppCredentials(awsClient(SECRETS_MANAGER), config().github.appSecretArn),
);
