import type { GitHubAppCredentials } from '../source-host/github-app-secret.js';
import type { WebhookSecret } from './port.js';

/**
 * The webhook secret of the GitHub App (AWS mode): the `webhookSecret` field of the App's secret, read
 * through the same cached credentials as the source host (a failed read is not cached, so an operator's
 * fix takes effect on the next delivery).
 */
export class GitHubAppWebhookSecret implements WebhookSecret {
  constructor(private readonly credentials: Pick<GitHubAppCredentials, 'get'>) {}

  async current(): Promise<string> {
    return (await this.credentials.get()).webhookSecret;
  }
}
