import { assertDeploySlot } from '../../core/applications/index.js';
import { requestRedeploy } from '../../core/environments/index.js';
import { keys } from '../../manifest/tables.js';
import { workflows } from '../../ports/registry/workflows.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

/** PATCH /v1/preview/environments/{owner}/{repo}/{pr}: re-run the pipeline at the current head SHA. */
export const { main, handler } = route('redeployEnvironment', { params: envPathSchema }, async (req) => {
  const ref = envRef(req.principal.orgId, req.params);
  await assertDeploySlot(ref.orgId, keys.environments.envKey(ref.repoFullName, ref.prNumber));
  await requestRedeploy(workflows(), ref);
  return {
    statusCode: 202,
    body: { accepted: true, repoFullName: ref.repoFullName, prNumber: ref.prNumber },
  };
});
