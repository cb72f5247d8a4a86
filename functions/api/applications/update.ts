import * as z from 'zod/mini';
import { toApplicationView, updateApplication } from '../../core/tenancy.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ applicationId: rowId });
const label = z.string().check(z.maxLength(255));
const list = z.array(z.string().check(z.maxLength(1000))).check(z.maxLength(1000));
/**
 * The preview rules (core/preview-rules.ts, which checks them further: labels, globs, logins, counts).
 * `""` turns a label rule off, `[]` empties a list. Strict: an unknown member is a 400, not ignored.
 */
const body = z
  .strictObject({
    skipLabel: z.optional(label),
    requireLabel: z.optional(label),
    paths: z.optional(list),
    skipAuthors: z.optional(list),
  })
  .check(
    z.refine((b) => Object.values(b).some((v) => v !== undefined), {
      message: 'give at least one of skipLabel, requireLabel, paths, skipAuthors',
    }),
  );

/**
 * PATCH /v1/preview/applications/{applicationId}: change which pull requests get a preview (issue 27;
 * what `previewctl apps update --skip-label … --require-label … --paths … --skip-authors …` sets). Answers
 * the application as the listing shows it. 404 for another organization's application; a 400 names the
 * bad field, and nothing is stored.
 */
export const { main, handler } = route(
  'updateApplication',
  { params, body, bodyRequired: true },
  async (req) => {
    const app = await updateApplication(req.principal.orgId, req.params.applicationId, req.body);
    return { statusCode: 200, body: toApplicationView(app) };
  },
);
