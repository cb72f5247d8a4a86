import { onRedeployRequested, redeployRequestedDetail } from '../core/github/index.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { workflows } from '../ports/registry/workflows.js';
import { consumer } from './consume.js';

/**
 * Target of the `previewRedeployRequested` rule, the documented custom event (`source:
 * "preview.redeploy"`, `detail-type: "Preview Redeploy Requested"`, detail `{orgId, repoFullName,
 * prNumber, app?, mode?}`): redeploy a whole environment, or one app.
 */
export const handler = consumer('previewRedeployRequested', redeployRequestedDetail, (detail) =>
  onRedeployRequested({ workflows: workflows(), prStatus: prStatus() }, detail),
);
