import '../../shared/polyfills.js';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { serveRunReport } from '../../core/runs/index.js';
import { mediaReader } from '../../ports/registry/media.js';
import { log } from '../../shared/log.js';
import { stagePath } from '../stage.js';

/**
 * GET /report/{run_id}?expires=…&sig=…: a run's report page, for a browser without credentials (the
 * signed link of the start-run response is the authorization: 403 for a bad signature, 410 once expired).
 * HTML, so it is a plain handler rather than a JSON `route()`. Locally the server serves the same page
 * (lib/local/media-routes.ts); in AWS this handler sits behind `GET /report/{run_id}` with no authorizer.
 */
export async function handler(event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> {
  const headers = Object.fromEntries(
    Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v ?? '')]),
  );
  const host = headers.host || event.requestContext?.domainName || 'localhost';
  const stage = stagePath(event, host);
  try {
    const answer = await serveRunReport(mediaReader(), {
      path: `/report/${event.pathParameters?.run_id ?? ''}`,
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
    log.error('run report failed', { name: (err as Error).name });
    return { statusCode: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error' };
  }
}
