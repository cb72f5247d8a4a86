import { gateLinks, onGateRequested } from '../core/gate/index.js';
import { gateRequestedDetail } from '../core/github/index.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/**
 * Target of the `gateRequested` rule: what a pull request asked of the merge gate (GitHub's re-run
 * button, `Re-run failed tests`, a `/preview skip-tests <reason>` comment), for one organization.
 */
export const handler = consumer('gateRequested', gateRequestedDetail, (detail) =>
  onGateRequested({ workflows: workflows(), prStatus: prStatus(), links: gateLinks(linkSigner) }, detail),
);
