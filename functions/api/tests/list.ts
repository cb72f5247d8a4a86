import * as z from 'zod/mini';
import { listTests } from '../../core/test-definitions/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const query = z.object({ folder: z.optional(rowId) });

/**
 * GET /test[?folder=ID]: the caller's organization's tests, newest first, without steps (additive: the
 * spec reads one test only). What `previewctl tests list` prints.
 */
export const { main, handler } = route('listTests', { query }, async (req) => ({
  statusCode: 200,
  body: await listTests(req.principal.orgId, { folderId: req.query.folder }),
}));
