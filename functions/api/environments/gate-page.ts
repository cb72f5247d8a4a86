import '../../shared/polyfills.js';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { serveCommitPage } from '../../core/gate/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { log } from '../../shared/log.js';
import { stagePath } from '../stage.js';

/**
 * GET /gate/{org_id}/{owner}/{repo}/{pr}/{sha}?expires=…&sig=…: the merge gate of one head commit, the
 * page a check run's `details_url` opens in AWS (the API serves no dashboard), for a browser without
 * credentials: the signed link is the authorization (403 for a bad signature, 410 once expired). HTML,
 * so a plain handler rather than a JSON `route()`, like the run report. Locally the server serves the
 * same page (lib/local/media-routes.ts).
 */
export async function handler(event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> {
  const headers = Object.fromEntries(
    Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v ?? '')]),
  );
  const host = headers.host || event.requestContext?.domainName || 'localhost';
  const stage = stagePath(event, host);
  const p = event.pathParameters ?? {};
  try {
    const answer = await serveCommitPage(mediaReader(), {
      // The path as signed (each segment encoded; API Gateway hands them decoded).
      path: `/gate/${[p.org_id, p.owner, p.repo, p.pr, p.sha].map((s) => encodeURIComponent(s ?? '')).join('/')}`,
      expires: event.queryStringParameters?.expires ?? undefined,
      sig: event.queryStringParameters?.sig ?? undefined,
      baseUrl: `https://${host}${stage}`,
    });
    return {
      statusCode: answer.status,
      headers: {
        'content-type': answer.contentType,
        'cache-control': 'no-store',
        'referrer-policy': 'no-referrer',
        'content-security-policy': answer.csp,
      },
      body: answer.body,
    };
  } catch (err) {
    log.error('merge gate page failed', { name: (err as Error).name });
    return { statusCode: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error' };
  }
}
