import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { log } from '../shared/log.js';
import { stagePath } from './stage.js';

/** What a page's server answers: the HTML (or a short text) and the policy it is shown under. */
export interface PageAnswer {
  status: number;
  contentType: string;
  body: string;
  csp: string;
}

/**
 * The handler of an HTML page a signed link opens in a browser without credentials (a run's report, a
 * head commit's merge gate): `serve` checks the link and renders, given the event and the base URL the
 * page's own links start with (`https://<host><stage>`). HTML, so a plain handler rather than a JSON
 * `route()`; never cached, no referrer, the page's own content security policy; a failure is a bare 500
 * that names nothing (`what` goes to the log).
 */
export function signedPage(
  what: string,
  serve: (event: APIGatewayProxyEvent, baseUrl: string) => Promise<PageAnswer>,
): (event: APIGatewayProxyEvent) => Promise<APIGatewayProxyResult> {
  return async (event): Promise<APIGatewayProxyResult> => {
    const headers = Object.fromEntries(
      Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v ?? '')]),
    );
    const host = headers.host || event.requestContext?.domainName || 'localhost';
    try {
      const answer = await serve(event, `https://${host}${stagePath(event, host)}`);
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
      log.error(`${what} failed`, { name: (err as Error).name });
      return { statusCode: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error' };
    }
  };
}
