import { config } from '../../shared/config.js';
import { GitHubAppSourceHost } from '../source-host/github-app.js';
import { adapter } from './adapters.js';
import { githubAppCredentials } from './github-app.js';

/** The GitHub App's webhook deliveries (listed and redelivered as the App). */
export const webhookDeliveries = /* @__PURE__ */ adapter('webhookDeliveries', () =>
  new GitHubAppSourceHost({
    credentials: githubAppCredentials(),
    apiUrl: config().github.apiUrl,
  }).webhookDeliveries(),
);
