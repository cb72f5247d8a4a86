import { environmentStatus } from '../../core/environments/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

/**
 * GET /v1/preview/environments/{owner}/{repo}/{pr}: status from stored data, org-scoped; a protected
 * environment's carries `accessUrls` (its application's access key signs them).
 */
export const { main, handler } = route('getEnvironment', { params: envPathSchema }, async (req) => ({
  statusCode: 200,
  body: await environmentStatus(envRef(req.principal.orgId, req.params), secretStore()),
}));
