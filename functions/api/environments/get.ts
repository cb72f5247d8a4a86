import { environmentStatus } from '../../core/environments/index.js';
import { latestGate } from '../../core/gate/index.js';
import { keys } from '../../manifest/tables.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

/**
 * GET /v1/preview/environments/{owner}/{repo}/{pr}: status from stored data, org-scoped; a protected
 * environment's carries `accessUrls` (its application's access key signs them), and a pull request's
 * with `run_on_preview` tests `gate` (additive: the merge gate of its latest head, composed here: the
 * environments domain does not know the gate).
 */
export const { main, handler } = route('getEnvironment', { params: envPathSchema }, async (req) => {
  const ref = envRef(req.principal.orgId, req.params);
  const status = await environmentStatus(ref, secretStore());
  const gate =
    ref.prNumber > 0
      ? await latestGate({
          orgId: ref.orgId,
          envKey: keys.environments.envKey(ref.repoFullName, ref.prNumber),
        })
      : undefined;
  return { statusCode: 200, body: gate ? { ...status, gate } : status };
});
