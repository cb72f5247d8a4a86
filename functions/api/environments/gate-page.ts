import '../../shared/polyfills.js';
import { serveCommitPage } from '../../core/gate/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { signedPage } from '../page.js';

/**
 * GET /gate/{org_id}/{owner}/{repo}/{pr}/{sha}?expires=…&sig=…: the merge gate of one head commit, the
 * page a check run's `details_url` opens in AWS (the API serves no dashboard), for a browser without
 * credentials: the signed link is the authorization (403 for a bad signature, 410 once expired), like
 * the run report. Locally the server serves the same page (lib/local/media-routes.ts).
 */
export const handler = signedPage('merge gate page', (event, baseUrl) => {
  const p = event.pathParameters ?? {};
  return serveCommitPage(mediaReader(), {
    // The path as signed (each segment encoded; API Gateway hands them decoded).
    path: `/gate/${[p.org_id, p.owner, p.repo, p.pr, p.sha].map((s) => encodeURIComponent(s ?? '')).join('/')}`,
    expires: event.queryStringParameters?.expires ?? undefined,
    sig: event.queryStringParameters?.sig ?? undefined,
    baseUrl,
  });
});
