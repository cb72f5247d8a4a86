import * as z from 'zod/mini';
import { listApplications } from '../../core/applications/index.js';
import { repoFullName } from '../../shared/validation.js';
import { route } from '../route.js';

const query = z.object({ repo: z.optional(repoFullName) });

/**
 * GET /v1/preview/applications[?repo=owner/repo]: the caller's organization's applications (additive;
 * the spec has no listing), oldest first; with `repo` the one linking that repository (or none). What
 * `previewctl apps list` prints and what its secrets commands find an application id with.
 */
export const { main, handler } = route('listApplications', { query }, async (req) => ({
  statusCode: 200,
  body: { applications: await listApplications(req.principal.orgId, req.query.repo) },
}));
