import { listEnvironments } from '../../core/environments/index.js';
import { route } from '../route.js';

/**
 * GET /v1/preview/environments: every environment of the caller's organization (additive; the spec has
 * no listing), as PreviewStatus objects, most recently updated first. What the dashboard polls.
 */
export const { main, handler } = route('listEnvironments', {}, async (req) => {
  const environments = await listEnvironments(req.principal.orgId);
  environments.sort((a, b) => (b.updatedAt ?? '').localeCompare(a.updatedAt ?? ''));
  return { statusCode: 200, body: { environments } };
});
