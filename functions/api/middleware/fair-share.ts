import { takeRequest } from '../../core/applications/index.js';
import type { Middleware } from './request.js';

export interface FairShareOptions {
  /** Counts one request of an organization; throws TooManyRequestsError past its share. @default core/fair-share.ts `takeRequest` */
  take?: (orgId: string) => Promise<void>;
}

/**
 * Counts the request against its organization's fair share (core/fair-share.ts): 429 with `Retry-After`
 * past it. Runs after `authn`, which names the organization. GitHub's webhooks act for no one
 * organization and are not counted.
 */
export const fairShare = ({ take = takeRequest }: FairShareOptions = {}): Middleware => ({
  before: async (request) => {
    const principal = request.internal.principal;
    if (principal?.orgId && !principal.githubWebhook) await take(principal.orgId);
  },
});
