import * as z from 'zod/mini';
import { assertRunSlot } from '../../core/applications/index.js';
import { reportLink, startRun } from '../../core/runs/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { workflows } from '../../ports/registry/workflows.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ test_id: rowId });
const body = z.optional(
  z.object({
    application_version_id: z.optional(
      z.string().check(z.minLength(1, 'must not be empty'), z.maxLength(256)),
    ),
    source: z.optional(z.string().check(z.minLength(1, 'must not be empty'), z.maxLength(256))),
    // Overrides by variable name; unknown names are ignored. Any name is data: `constructor` overrides a
    // variable of that name, and `__proto__` never gets here (route.ts refuses such members).
    runtime_metadata: z.optional(z.record(z.string(), z.string().check(z.maxLength(10_000)))),
  }),
);

/**
 * POST /test/{test_id}/run: start a run of the test (201). The `testRun` state machine runs it in a
 * browser; `url` is a signed link to its report page (no credentials needed, valid 7 days).
 */
export const { main, handler } = route('startRun', { params, body }, async (req) => {
  await assertRunSlot(req.principal.orgId);
  const runId = await startRun({ workflows: workflows() }, req.principal.orgId, req.params.test_id, {
    applicationVersionId: req.body?.application_version_id,
    source: req.body?.source ?? 'api',
    runtimeMetadata: req.body?.runtime_metadata ?? {},
  });
  return {
    statusCode: 201,
    body: {
      message: 'test run created',
      url: await reportLink(mediaReader(), req.baseUrl, runId),
      run_id: runId,
    },
  };
});
