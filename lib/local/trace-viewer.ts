import { createReadStream } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TRACE_VIEWER_PATH, traceViewerFile, traceViewerType } from '../../functions/core/runs/index.js';

/*
 * The Playwright trace viewer, served by the local server from its own origin: the static app
 * that ships inside playwright-core (`lib/vite/traceViewer`), at `/trace-viewer/`. It holds no data and
 * needs no credentials; it opens the trace its `?trace=` names (a run's signed media URL, this same
 * origin) in the browser, through its service worker (which a browser allows on http only for localhost
 * and 127.0.0.1, as `npm start` serves). Nothing of it is sent anywhere else. Which files, and their
 * types: functions/core/trace-viewer.ts (shared with the AWS page, functions/api/runs/trace-viewer.ts).
 */

/** Serve `req` when it asks for the trace viewer (GET or HEAD); returns whether it did. */
export function serveTraceViewer(req: IncomingMessage, res: ServerResponse, url: URL): boolean {
  if (url.pathname === TRACE_VIEWER_PATH.slice(0, -1)) {
    res.writeHead(308, { location: `${TRACE_VIEWER_PATH}${url.search}` });
    res.end();
    return true;
  }
  if (!url.pathname.startsWith(TRACE_VIEWER_PATH)) return false;
  const answer = (status: number, error: string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ error }));
    return true;
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return answer(405, 'method not allowed');
  }
  const found = traceViewerFile(url.pathname.slice(TRACE_VIEWER_PATH.length));
  if (!found) return answer(404, 'not found');
  const { file, size } = found;
  res.writeHead(200, {
    'content-type': traceViewerType(file),
    'content-length': String(size),
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
    // The service worker's scope is the viewer's folder (where it is served from).
    ...(file.endsWith('sw.bundle.js') ? { 'service-worker-allowed': TRACE_VIEWER_PATH } : {}),
  });
  if (req.method === 'HEAD') {
    res.end();
    return true;
  }
  createReadStream(file).pipe(res);
  return true;
}
