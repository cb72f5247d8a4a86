import { onPullRequestClosed, pullRequestClosedDetail } from '../core/github/index.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/** Target of the `pullRequestClosed` rule: tear the pull request's preview down for one organization. */
export const handler = consumer('pullRequestClosed', pullRequestClosedDetail, (detail) =>
  onPullRequestClosed({ workflows: workflows() }, detail),
);
