import { defaultBranchPushedDetail, onDefaultBranchPushed } from '../core/github/index.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { sourceHost } from '../ports/registry/source-host.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/** Target of the `defaultBranchPushed` rule: redeploy the main-branch environment (0). */
export const handler = consumer('defaultBranchPushed', defaultBranchPushedDetail, (detail) =>
  onDefaultBranchPushed({ workflows: workflows(), prStatus: prStatus(), sourceHost: sourceHost() }, detail),
);
