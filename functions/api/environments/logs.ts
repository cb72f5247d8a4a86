import * as z from 'zod/mini';
import { appLogs, DEFAULT_TAIL_LINES, MAX_TAIL_LINES } from '../../core/environments/index.js';
import { appLogReader } from '../../ports/registry/runtime/app-logs.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { appName } from '../../shared/validation.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

const params = z.extend(envPathSchema, { app: appName });
const query = z.object({
  tail: z.optional(
    z
      .pipe(
        z
          .string()
          .check(z.regex(/^[0-9]{1,6}$/, `tail must be a whole number of lines from 1 to ${MAX_TAIL_LINES}`)),
        z.transform(Number),
      )
      .check(
        z.refine((n) => n >= 1 && n <= MAX_TAIL_LINES, {
          message: `tail must be a whole number of lines from 1 to ${MAX_TAIL_LINES}`,
        }),
      ),
  ),
  source: z.optional(z.enum(['app', 'build'], { message: 'source must be app or build' })),
});

/**
 * GET …/{pr}/apps/{app}/logs?tail=N&source=app|build: the end of an app's output or of its latest build's,
 * as text (secret values masked, at most 1 MB); org-scoped: another org's environment is a 404.
 */
export const { main, handler } = route('getAppLogs', { params, query }, async (req) => ({
  statusCode: 200,
  contentType: 'text/plain; charset=utf-8',
  body: await appLogs(
    { runtime: appLogReader(), secrets: secretStore() },
    envRef(req.principal.orgId, req.params),
    {
      app: req.params.app,
      source: req.query.source ?? 'app',
      tail: req.query.tail ?? DEFAULT_TAIL_LINES,
    },
  ),
}));
