/*
 * GitHub, the front of the domain: a webhook delivery normalized and published as events, and the
 * consumers of those events that deploy, redeploy and tear down (webhooks.ts); failed deliveries asked
 * again (redelivery.ts).
 */

export { type GateRequestedDetail, gateRequestedDetail } from './gate-requests.js';
export { type RedeliveryOutcome, redeliverFailedDeliveries } from './redelivery.js';
export {
  defaultBranchPushedDetail,
  onDefaultBranchPushed,
  onPullRequestClosed,
  onPullRequestUpdated,
  onRedeployRequested,
  pullRequestClosedDetail,
  pullRequestUpdatedDetail,
  receiveWebhook,
  redeployRequestedDetail,
} from './webhooks.js';
