import * as z from 'zod/mini';
import { getRecipeVersion } from '../../core/recipes/index.js';
import { queryInteger, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ setupId: rowId, version: queryInteger(1, 1_000_000_000) });

/**
 * GET /v1/setup/setups/{setupId}/scenario-recipe-versions/{version}: one version with its file as
 * uploaded (`file`, extra keys included); additive. 404 for another organization's setup.
 */
export const { main, handler } = route('getRecipeVersion', { params }, async (req) => ({
  statusCode: 200,
  body: await getRecipeVersion(req.principal.orgId, req.params.setupId, req.params.version),
}));
