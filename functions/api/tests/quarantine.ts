import * as z from 'zod/mini';
import { quarantineTest } from '../../core/gate/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ test_id: rowId });
const text = (max: number) => z.string().check(z.maxLength(max), z.regex(/\S/, 'must not be empty'));
const body = z.object({
  owner: text(100),
  reason: text(500),
  until: z.optional(z.string().check(z.maxLength(40))),
});

/**
 * PUT /test/{test_id}/quarantine: quarantine a `run_on_preview` test (200, the quarantine): it still
 * runs and is reported, but its failure does not fail the merge gate until `until` (at most 30 days
 * ahead; default 30 days). 409 past the application's cap (a fifth of its run_on_preview tests, at least
 * one) or for a test that does not run on previews.
 */
export const { main, handler } = route(
  'quarantineTest',
  { params, body, bodyRequired: true },
  async (req) => ({
    statusCode: 200,
    body: await quarantineTest(req.principal.orgId, req.params.test_id, {
      owner: req.body.owner.trim(),
      reason: req.body.reason.trim(),
      ...(req.body.until !== undefined ? { until: req.body.until } : {}),
    }),
  }),
);
