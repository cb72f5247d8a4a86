import * as z from 'zod/mini';
import { listRunPage, RUN_STATUSES, reportLink } from '../../core/runs/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { ValidationError } from '../../shared/errors.js';
import { queryBoolean, queryInteger, rowId } from '../../shared/validation.js';
import { route } from '../route.js';

/** GET /run's parameters; any other is refused by name (a misspelt filter would list everything). */
const parameters = {
  limit: z._default(queryInteger(1, 100), 20),
  offset: z._default(queryInteger(0), 0),
  test: z.optional(rowId),
  folder: z.optional(rowId),
  status: z.optional(z.enum(RUN_STATUSES, { message: 'must be pending, running, passed or failed' })),
  media: queryBoolean,
  steps: queryBoolean,
  flaky: z
    .pipe(
      z.optional(z.enum(['true', 'false'], { message: 'must be true or false' })),
      z.transform((v) => v === 'true'),
    )
    .register(z.globalRegistry, {
      description:
        'Additive: `true` keeps only the flaky runs, those that passed after a failed attempt ' +
        '(a test with `retries`); they carry `metadata.flaky: true`. `false` or absent: every run. Combines ' +
        'with test, folder and status.',
    }),
  healed: z
    .pipe(
      z.optional(z.enum(['true', 'false'], { message: 'must be true or false' })),
      z.transform((v) => v === 'true'),
    )
    .register(z.globalRegistry, {
      description:
        'Additive: `true` keeps only the runs with a healed step (a recorded selector that matched nothing, ' +
        'its element found from the recording); they carry `healed_steps`. `false` or absent: every run. ' +
        'Combines with test, folder, status and flaky.',
    }),
  cursor: z
    .optional(z.string().check(z.maxLength(512, 'must be a cursor from a Link header')))
    .register(z.globalRegistry, {
      description:
        'Extension: an opaque cursor, taken from the `Link: <…>; rel="next"` header of the previous page, ' +
        'which answers whenever a next page exists (also on an offset page). The next page starts just ' +
        'after the previous one and costs O(limit) whatever the offset; runs started since do not shift ' +
        'it. Only valid with the same filters and organization (else 400); not with offset > 0.',
    }),
};
const query = z.strictObject(parameters, {
  error: (issue) =>
    issue.code === 'unrecognized_keys'
      ? `unknown parameter ${issue.keys.map((k) => `"${k}"`).join(', ')} (GET /run takes ${Object.keys(parameters).join(', ')})`
      : undefined,
});

/**
 * GET /run: the org's runs, newest first, filtered by test, folder and status, paged by limit/offset or by
 * the cursor of the `Link: <…>; rel="next"` header (an extension to the spec's offset paging); each with
 * its `report_url` (additive).
 */
export const { main, handler } = route('listRuns', { query }, async (req) => {
  const { limit, offset, test, folder, status, media, steps, flaky, healed, cursor } = req.query;
  if (cursor !== undefined && offset > 0)
    throw new ValidationError(
      'invalid query: cursor: cannot be combined with offset (the cursor says where the page starts)',
    );
  const filters = {
    testId: test,
    folderId: folder,
    status,
    ...(flaky ? { flaky } : {}),
    ...(healed ? { healed } : {}),
  };
  const page = await listRunPage(
    req.principal.orgId,
    filters,
    cursor !== undefined ? { limit, cursor } : { limit, offset },
    { media, steps },
    (key) => mediaReader().url(key, req.baseUrl),
  );
  // Each run's report link (additive `report_url`), minted now and valid 7 days.
  const runs = await Promise.all(
    page.runs.map(async (run) => ({
      ...run,
      report_url: await reportLink(mediaReader(), req.baseUrl, run.id),
    })),
  );
  if (page.next === undefined) return { statusCode: 200, body: runs };
  const next = new URLSearchParams({ limit: String(limit) });
  if (test !== undefined) next.set('test', test);
  if (folder !== undefined) next.set('folder', folder);
  if (status !== undefined) next.set('status', status);
  if (flaky) next.set('flaky', 'true');
  if (healed) next.set('healed', 'true');
  if (media) next.set('media', 'true');
  if (steps) next.set('steps', 'true');
  next.set('cursor', page.next);
  return { statusCode: 200, body: runs, headers: { link: `<${req.baseUrl}/run?${next}>; rel="next"` } };
});
