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
