import '../../shared/polyfills.js';
import { serveRunReport } from '../../core/runs/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { signedPage } from '../page.js';

/**
 * GET /report/{run_id}?expires=…&sig=…: a run's report page, for a browser without credentials (the
 * signed link of the start-run response is the authorization: 403 for a bad signature, 410 once expired).
 * Locally the server serves the same page (lib/local/media-routes.ts); in AWS this handler sits behind
 * `GET /report/{run_id}` with no authorizer.
 */
export const handler = signedPage('run report', (event, baseUrl) =>
  serveRunReport(mediaReader(), {
    path: `/report/${event.pathParameters?.run_id ?? ''}`,
    expires: event.queryStringParameters?.expires ?? undefined,
    sig: event.queryStringParameters?.sig ?? undefined,
    baseUrl,
  }),
);
