import { onPullRequestUpdated, pullRequestUpdatedDetail } from '../core/webhooks.js';
import { prStatus, workflows } from '../ports/registry.js';
import { consumer } from './consume.js';

/** Target of the `pullRequestUpdated` rule: deploy the pull request's head for one organization. */
export const handler = consumer('pullRequestUpdated', pullRequestUpdatedDetail, (detail) =>
  onPullRequestUpdated({ workflows: workflows(), prStatus: prStatus() }, detail),
);
