import { listSecrets } from '../../core/secrets/index.js';
import { route } from '../route.js';
import { bundlePath } from './schemas.js';

/** GET /v1/preview/secrets/{applicationId}/{app}: key names and metadata, never values. */
export const { main, handler } = route('listSecrets', { params: bundlePath }, async (req) => {
  const { applicationId, app } = req.params;
  const keys = await listSecrets(req.principal.orgId, { applicationId, app });
  return { statusCode: 200, body: { applicationId, app, keys } };
});
