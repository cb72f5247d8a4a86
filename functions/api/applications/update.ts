import * as z from 'zod/mini';
import {
  assertProtectable,
  ensureAccessKey,
  parseAccessMode,
  parseSleepMinutes,
  toApplicationView,
  updateApplication,
} from '../../core/applications/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ applicationId: rowId });
const label = z.string().check(z.maxLength(255));
const list = z.array(z.string().check(z.maxLength(1000))).check(z.maxLength(1000));
/**
 * The preview rules (core/preview-rules.ts, which checks them further: labels, globs, logins, counts).
 * `""` turns a label rule off, `[]` empties a list. The front door (core/access.ts, which checks
 * them further): `access` protected|public, `sleepAfterMinutes` 0 (never) to a week, decimals allowed.
 * Strict: an unknown member is a 400, not ignored.
 */
const body = z
  .strictObject({
    skipLabel: z.optional(label),
    requireLabel: z.optional(label),
    paths: z.optional(list),
    skipAuthors: z.optional(list),
    access: z.optional(z.string().check(z.maxLength(20))),
    sleepAfterMinutes: z.optional(z.number()),
  })
  .check(
    z.refine((b) => Object.values(b).some((v) => v !== undefined), {
      message: 'give at least one of skipLabel, requireLabel, paths, skipAuthors, access, sleepAfterMinutes',
    }),
  );

/**
 * PATCH /v1/preview/applications/{applicationId}: change which pull requests get a preview and
 * its previews' front door (access and sleep): what `previewctl apps update --skip-label … --require-label …
 * --paths … --skip-authors … --access … --sleep-after-minutes …` sets. Answers the application as the
 * listing shows it. 404 for another organization's application; a 400 names the bad field, and nothing is
 * stored. Setting `access` makes sure the application has its access key (which signs its previews'
 * links; never answered); an environment follows a change of access on its next deploy.
 */
export const { main, handler } = route(
  'updateApplication',
  { params, body, bodyRequired: true },
  async (req) => {
    const { access, sleepAfterMinutes, ...rules } = req.body;
    const settings = {
      ...rules,
      ...(access !== undefined ? { access: parseAccessMode(access) } : {}),
      ...(sleepAfterMinutes !== undefined ? { sleepAfterMinutes: parseSleepMinutes(sleepAfterMinutes) } : {}),
    };
    // Protection this stack cannot enforce is refused before anything is stored (400, naming the setting).
    assertProtectable(settings.access);
    const app = await updateApplication(req.principal.orgId, req.params.applicationId, settings);
    if (settings.access) await ensureAccessKey(secretStore(), app.applicationId);
    return { statusCode: 200, body: toApplicationView(app) };
  },
);
