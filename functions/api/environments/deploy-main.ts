import * as z from 'zod/mini';
import { assertDeploySlot } from '../../core/applications/index.js';
import { requestMainBranchDeploy, statusPath } from '../../core/environments/index.js';
import { sourceHost } from '../../ports/registry/source-host.js';
import { workflows } from '../../ports/registry/workflows.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ applicationId: rowId });

/** POST /v1/preview/applications/{applicationId}/0: deploy the linked repository's main branch as env 0. */
export const { main, handler } = route('deployMainBranch', { params }, async (req) => {
  await assertDeploySlot(req.principal.orgId);
  const out = await requestMainBranchDeploy(
    { workflows: workflows(), sourceHost: sourceHost() },
    req.principal.orgId,
    req.params.applicationId,
  );
  return { statusCode: 202, body: { accepted: true, ...out, statusUrl: statusPath(out.repoFullName, 0) } };
});
