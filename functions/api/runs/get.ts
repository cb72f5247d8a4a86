import * as z from 'zod/mini';
import { getRun, reportLink } from '../../core/runs/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { queryBoolean, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ run_id: rowId });
const query = z.object({ media: queryBoolean, steps: queryBoolean });

/**
 * GET /run/{run_id}: one run of the caller's org; steps only when asked for; with `media=true` the video
 * and screenshots as URLs minted now and valid one hour. `report_url` (additive): a signed link to the
 * run's report, minted now and valid 7 days, as the start-run answer's `url`.
 */
export const { main, handler } = route('getRun', { params, query }, async (req) => {
  const run = await getRun(req.principal.orgId, req.params.run_id, req.query, (key) =>
    mediaReader().url(key, req.baseUrl),
  );
  return {
    statusCode: 200,
    body: { ...run, report_url: await reportLink(mediaReader(), req.baseUrl, run.id) },
  };
});
