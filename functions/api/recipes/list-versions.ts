import * as z from 'zod/mini';
import { listRecipeVersions } from '../../core/recipes/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ setupId: rowId });

/**
 * GET /v1/setup/setups/{setupId}/scenario-recipe-versions: the setup's versions, newest first, without
 * their files (additive; the spec only uploads). 404 for another organization's setup.
 */
export const { main, handler } = route('listRecipeVersions', { params }, async (req) => ({
  statusCode: 200,
  body: { versions: await listRecipeVersions(req.principal.orgId, req.params.setupId) },
}));
