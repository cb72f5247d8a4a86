import * as z from 'zod/mini';
import { getRun } from '../../core/runs.js';
import { mediaReader } from '../../ports/registry/media.js';
import { queryBoolean, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ run_id: rowId });
const query = z.object({ media: queryBoolean, steps: queryBoolean });

/**
 * GET /run/{run_id}: one run of the caller's org; steps only when asked for; with `media=true` the video
 * and screenshots as URLs minted now and valid one hour.
 */
export const { main, handler } = route('getRun', { params, query }, async (req) => ({
  statusCode: 200,
  body: await getRun(req.principal.orgId, req.params.run_id, req.query, (key) =>
    mediaReader().url(key, req.baseUrl),
  ),
}));
