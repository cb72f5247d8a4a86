import { GitHubAppWebhookSecret } from '../webhook-secret/github-app.js';
import { adapter } from './adapters.js';
import { githubAppCredentials } from './github-app.js';

/** The secret GitHub signs webhook deliveries with: the App secret's `webhookSecret`. */
export const webhookSecret = /* @__PURE__ */ adapter(
  'webhookSecret',
  () => new GitHubAppWebhookSecret(githubAppCredentials()),
);
