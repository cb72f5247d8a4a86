import * as z from 'zod';
import { listRuns, RUN_STATUSES } from '../../core/runs.js';
import { mediaStore } from '../../ports/registry.js';
import { queryBoolean, queryInteger, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const query = z.object({
  limit: queryInteger(1, 100).default(20),
  offset: queryInteger(0).default(0),
  test: rowId.optional(),
  folder: rowId.optional(),
  status: z.enum(RUN_STATUSES, { message: 'must be pending, running, passed or failed' }).optional(),
  media: queryBoolean,
  steps: queryBoolean,
});

/** GET /run: the org's runs, newest first, filtered by test, folder and status, paged by limit/offset. */
export const { main, handler } = route('listRuns', { query }, async (req) => {
  const { limit, offset, test, folder, status, media, steps } = req.query;
  return {
    statusCode: 200,
    body: await listRuns(
      req.principal.orgId,
      { testId: test, folderId: folder, status },
      { limit, offset },
      { media, steps },
      (key) => mediaStore().url(key, req.baseUrl),
    ),
  };
});
