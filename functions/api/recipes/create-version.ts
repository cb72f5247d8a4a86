import * as z from 'zod/mini';
import { createRecipeVersion } from '../../core/recipes/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ setupId: rowId });
// The file's rules (and the 413) need the raw text and name the culprit: the use case checks them.
const body = z.unknown();

/** POST /v1/setup/setups/{setupId}/scenario-recipe-versions: store the next version of a setup's recipes. */
export const { main, handler } = route(
  'createRecipeVersion',
  { params, body, bodyRequired: true },
  async (req) => ({
    statusCode: 201,
    body: await createRecipeVersion({
      orgId: req.principal.orgId,
      setupId: req.params.setupId,
      doc: req.body,
      rawBody: req.rawBody,
    }),
  }),
);
