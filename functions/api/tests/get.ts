import * as z from 'zod/mini';
import { getTest } from '../../core/test-definitions/index.js';
import { queryBoolean, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ test_id: rowId });
const query = z.object({ steps: queryBoolean });

/** GET /test/{test_id}: one test of the caller's org; steps only with `steps=true`. */
export const { main, handler } = route('getTest', { params, query }, async (req) => ({
  statusCode: 200,
  body: await getTest(req.principal.orgId, req.params.test_id, req.query),
}));
