import { connect } from 'node:net';

/*
 * Raw HTTP to the local server, as an outsider would send it: any method, target, header name or value,
 * Host or none, any body bytes. Used by the fuzz tier and the integration tests of HTTP hardening; with
 * stored-state.ts's snapshot they show that a refused request changed nothing.
 */

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

export interface RawRequest {
  method: string;
  /** The request target as written on the request line (`/path?query`), not encoded for you. */
  target: string;
  /** Header lines in order; names and values are written as given (latin1). */
  headers?: [string, string][];
  /** The Host header: the server's own by default, `null` for none, or any value. */
  host?: string | null;
  body?: Buffer | string;
}

function parseResponse(raw: Buffer): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0)
    throw new Error(`incomplete response: ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`);
  const [statusLine, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
  const headers: Record<string, string> = Object.create(null);
  for (const line of lines) {
    const at = line.indexOf(':');
    headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = body.indexOf('\r\n', at);
      const size = Number.parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
      if (!size) break;
      parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  } else if (headers['content-length'] !== undefined) {
    body = body.subarray(0, Number(headers['content-length']));
  }
  const text = body.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, text, json };
}

/** One request on its own connection (`connection: close`), read to the end. */
export function rawRequest(baseUrl: string, req: RawRequest, timeoutMs = 20_000): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  const body = typeof req.body === 'string' ? Buffer.from(req.body, 'utf8') : req.body;
  const lines = [`${req.method} ${req.target} HTTP/1.1`];
  if (req.host !== null) lines.push(`host: ${req.host ?? `${hostname}:${port}`}`);
  for (const [k, v] of req.headers ?? []) lines.push(`${k}: ${v}`);
  if (body) lines.push(`content-length: ${body.length}`);
  lines.push('connection: close', '', '');
  const head = Buffer.from(lines.join('\r\n'), 'latin1');
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms to ${req.method} ${req.target.slice(0, 200)}`));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    // The server may answer (413, 431, 400) and close before it has read all we send.
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') {
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(parseResponse(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    });
    socket.write(body ? Buffer.concat([head, body]) : head);
  });
}

/** Whether an answer is exactly `{ "error": string }`. */
export const isErrorBody = (json: unknown): boolean =>
  typeof json === 'object' &&
  json !== null &&
  !Array.isArray(json) &&
  Object.keys(json).length === 1 &&
  typeof (json as { error?: unknown }).error === 'string';
