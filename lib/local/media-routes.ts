import { createReadStream } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveCommitPage } from '../../functions/core/gate/index.js';
import { serveRunReport } from '../../functions/core/runs/index.js';
import { LOCAL_MEDIA_PREFIX, LocalMediaStore } from '../../functions/ports/media/local-files.js';
import { mediaReader } from '../../functions/ports/registry.js';

/*
 * What the local server serves without credentials, at signed URLs (`?expires=<epoch>&sig=<HMAC>`):
 * run media (`/media/<key>`: screenshots, videos; in AWS these are presigned S3 URLs), run reports
 * (`/report/<run_id>`; in AWS functions/api/runs/report.ts) and a head commit's merge gate
 * (`/gate/<org>/<owner>/<repo>/<pr>/<sha>`; in AWS functions/api/environments/gate-page.ts). A missing or wrong signature is 403, an
 * expired link 410, whatever the object; only then is a missing object 404. Media refusals are JSON
 * `{"error"}` like the server's others; a report's are small HTML pages (a person opened the link).
 */

/** Answer `{"error": text}` like every other refusal of the server; true (the request was served). */
function plain(res: ServerResponse, status: number, text: string): true {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error: text }));
  return true;
}

/** One `bytes=a-b` range of a file of `size` bytes; undefined for none or one we do not serve. */
function rangeOf(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'bad' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'bad';
  let start: number;
  let end: number;
  if (m[1] === '') {
    start = Math.max(size - Number(m[2]), 0);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  return start > end || start >= size ? 'bad' : { start, end };
}

/**
 * Serve `req` when it asks for media or a report (GET or HEAD); returns whether it did. Called by the
 * local server before route matching.
 */
export async function serveSigned(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
  const isMedia = url.pathname.startsWith(LOCAL_MEDIA_PREFIX);
  const isReport = url.pathname.startsWith('/report/');
  const isGate = url.pathname.startsWith('/gate/');
  if (!isMedia && !isReport && !isGate) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return plain(res, 405, 'method not allowed');
  }
  const media = mediaReader();
  const expires = url.searchParams.get('expires') ?? undefined;
  const sig = url.searchParams.get('sig') ?? undefined;
  if (isReport || isGate) {
    const answer = await (isGate ? serveCommitPage : serveRunReport)(media, {
      path: url.pathname,
      expires,
      sig,
      baseUrl: `http://${req.headers.host ?? 'localhost'}`,
    });
    res.writeHead(answer.status, {
      'content-type': answer.contentType,
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'content-security-policy': answer.csp,
    });
    res.end(req.method === 'HEAD' ? undefined : answer.body);
    return true;
  }
  const check = await media.checkLink(url.pathname, expires, sig);
  if (check === 'forbidden') return plain(res, 403, 'this link is not valid');
  if (check === 'expired') return plain(res, 410, 'this link has expired');
  let key: string;
  try {
    key = decodeURIComponent(url.pathname.slice(LOCAL_MEDIA_PREFIX.length));
  } catch {
    return plain(res, 404, 'not found');
  }
  const object = media instanceof LocalMediaStore ? media.object(key) : undefined;
  if (!object) return plain(res, 404, 'not found');
  const range = rangeOf(req.headers.range, object.size);
  if (range === 'bad') {
    res.writeHead(416, { 'content-range': `bytes */${object.size}` });
    res.end();
    return true;
  }
  const headers = {
    'content-type': object.contentType,
    'accept-ranges': 'bytes',
    'cache-control': 'private, max-age=3600',
  };
  if (range) {
    res.writeHead(206, {
      ...headers,
      'content-length': String(range.end - range.start + 1),
      'content-range': `bytes ${range.start}-${range.end}/${object.size}`,
    });
  } else {
    res.writeHead(200, { ...headers, 'content-length': String(object.size) });
  }
  if (req.method === 'HEAD') {
    res.end();
    return true;
  }
  await new Promise<void>((resolve) => {
    const stream = createReadStream(object.path, range ? { start: range.start, end: range.end } : {});
    stream.on('error', () => {
      res.destroy();
      resolve();
    });
    stream.on('end', () => resolve());
    stream.pipe(res);
  });
  return true;
}
