import * as z from 'zod';
import { startRun } from '../../core/runs.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ test_id: rowId });
const body = z
  .object({
    application_version_id: z.string().min(1, 'must not be empty').max(256).optional(),
    source: z.string().min(1, 'must not be empty').max(256).optional(),
    runtime_metadata: z.record(z.string(), z.string().max(10_000)).optional(),
  })
  .optional();

/** POST /test/{test_id}/run: start a run of the test (201); it stays `pending` until runs execute. */
export const { main, handler } = route('startRun', { params, body }, async (req) => {
  const runId = await startRun(req.principal.orgId, req.params.test_id, {
    applicationVersionId: req.body?.application_version_id,
    source: req.body?.source ?? 'api',
    runtimeMetadata: req.body?.runtime_metadata ?? {},
  });
  return {
    statusCode: 201,
    body: { message: 'test run created', url: `${req.baseUrl}/run/${runId}`, run_id: runId },
  };
});
