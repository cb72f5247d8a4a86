import * as z from 'zod/mini';
import { assertDeploySlot } from '../../core/applications/index.js';
import { requestAppRedeploy } from '../../core/environments/index.js';
import { keys } from '../../manifest/tables.js';
import { workflows } from '../../ports/registry/workflows.js';
import { appName } from '../../shared/validation.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

const params = z.extend(envPathSchema, { app: appName });
const body = z.pipe(
  z.optional(
    z.object({
      mode: z._default(
        z.enum(['rebuild', 'restart'], { message: 'mode must be rebuild or restart' }),
        'rebuild',
      ),
    }),
  ),
  z.transform((b) => b ?? { mode: 'rebuild' as const }),
);

/** PATCH …/{pr}/apps/{app}: redeploy one app (rebuild, the default, or restart); siblings untouched. */
export const { main, handler } = route('redeployApp', { params, body }, async (req) => {
  const ref = envRef(req.principal.orgId, req.params);
  await assertDeploySlot(ref.orgId, keys.environments.envKey(ref.repoFullName, ref.prNumber));
  const { mode } = req.body;
  await requestAppRedeploy(workflows(), ref, req.params.app, mode);
  return {
    statusCode: 202,
    body: {
      accepted: true,
      repoFullName: ref.repoFullName,
      prNumber: ref.prNumber,
      app: req.params.app,
      mode,
    },
  };
});
