import { onPullRequestUpdated, pullRequestUpdatedDetail } from '../core/webhooks.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/** Target of the `pullRequestUpdated` rule: deploy the pull request's head for one organization. */
export const handler = consumer('pullRequestUpdated', pullRequestUpdatedDetail, (detail) =>
  onPullRequestUpdated({ workflows: workflows(), prStatus: prStatus() }, detail),
);
