import '../../shared/polyfills.js';
import { readFileSync } from 'node:fs';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import {
  inlineFonts,
  isTextType,
  TRACE_VIEWER_PATH,
  traceViewerFile,
  traceViewerType,
} from '../../core/runs/index.js';
import { log } from '../../shared/log.js';
import { stagePath } from '../stage.js';

/**
 * GET /trace-viewer/{proxy+}: a file of the Playwright trace viewer, which the run report links
 * each run and step to (`index.html?trace=<signed trace URL>`). In AWS this handler sits behind that route
 * with no authorizer (the files hold no data; the trace's own URL is signed and expires); its Lambda has
 * the viewer's folder beside its bundle. Locally lib/local/trace-viewer.ts serves the same files.
 * Text files are answered as text, stylesheets with their font inlined (`inlineFonts`: no binary answer
 * needed through API Gateway), anything else base64 (`isBase64Encoded`).
 */
export async function handler(event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> {
  const answer = (status: number, error: string, extra: Record<string, string> = {}) => ({
    statusCode: status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...extra },
    body: JSON.stringify({ error }),
  });
  if (event.httpMethod !== 'GET' && event.httpMethod !== 'HEAD')
    return answer(405, 'method not allowed', { allow: 'GET, HEAD' });
  const headers = Object.fromEntries(
    Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), String(v ?? '')]),
  );
  const host = headers.host || event.requestContext?.domainName || '';
  const stage = stagePath(event, host);
  try {
    const found = traceViewerFile(event.pathParameters?.proxy ?? '');
    if (!found) return answer(404, 'not found');
    const type = traceViewerType(found.file);
    const bytes = readFileSync(found.file);
    const text = isTextType(type);
    const body = text
      ? type.startsWith('text/css')
        ? inlineFonts(bytes.toString('utf8'), found.file)
        : bytes.toString('utf8')
      : bytes.toString('base64');
    return {
      statusCode: 200,
      headers: {
        'content-type': type,
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        // The service worker's scope is the viewer's folder, under the stage's path in API Gateway.
        ...(found.file.endsWith('sw.bundle.js')
          ? { 'service-worker-allowed': `${stage}${TRACE_VIEWER_PATH}` }
          : {}),
      },
      body: event.httpMethod === 'HEAD' ? '' : body,
      ...(text ? {} : { isBase64Encoded: true }),
    };
  } catch (err) {
    log.error('trace viewer file failed', { name: (err as Error).name });
    return { statusCode: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error' };
  }
}
