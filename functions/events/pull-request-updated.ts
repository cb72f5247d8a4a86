import { gateLinks } from '../core/gate/index.js';
import { onPullRequestUpdated, pullRequestUpdatedDetail } from '../core/github/index.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { sourceHost } from '../ports/registry/source-host.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/**
 * Target of the `pullRequestUpdated` rule: deploy the pull request's head for one organization. The
 * source host is asked for the pull request's head only when two updates of it share a second.
 */
export const handler = consumer('pullRequestUpdated', pullRequestUpdatedDetail, (detail) =>
  onPullRequestUpdated(
    {
      workflows: workflows(),
      prStatus: prStatus(),
      sourceHost: sourceHost(),
      links: gateLinks(linkSigner),
    },
    detail,
  ),
);
