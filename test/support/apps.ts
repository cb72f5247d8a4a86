import { readFileSync } from 'node:fs';
import type { Harness } from './harness.js';
import { bearer, call } from './harness.js';

/**
 * A tiny app for preview.yaml fixtures: listens on $PORT, answers /healthz, and `/` with what a test
 * checks: its name, pid, the env vars named in SHOW, and the stamp its build wrote.
 */
export const SERVER_JS = `
const http = require('node:http');
const fs = require('node:fs');
const name = process.argv[2] || 'app';
const show = (process.env.SHOW || '').split(',').filter(Boolean);
http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  const stamp = fs.existsSync('stamp-' + name) ? fs.readFileSync('stamp-' + name, 'utf8') : null;
  const env = Object.fromEntries(show.map((k) => [k, process.env[k] ?? null]));
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ app: name, pid: process.pid, env, stamp, version: fs.readFileSync('VERSION', 'utf8').trim() }));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

/** Writes `stamp-<name>` with a random value: each build is recognizable. */
export const BUILD_JS = `require('node:fs').writeFileSync('stamp-' + process.argv[2], String(Math.random()));`;

export type Status = {
  status: string;
  phase?: string;
  urls: Record<string, string>;
  error?: string;
  lastDeployedSha?: string;
};

/** Poll an environment until `done` says so (or fail after `timeoutMs`), like a caller would. */
export async function pollUntil(
  h: Harness | { url: string },
  org: { apiKey: string },
  path: string,
  done: (s: Status) => boolean,
  timeoutMs = 30_000,
): Promise<Status> {
  const deadline = Date.now() + timeoutMs;
  let last: Status | undefined;
  while (Date.now() < deadline) {
    const res = await call<Status>(h, 'GET', path, { headers: bearer(org as never) });
    if (res.status === 200) {
      last = res.body;
      if (done(last)) return last;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out; last status ${JSON.stringify(last)}`);
}

export const settled = (s: Status) => s.status === 'ready' || s.status === 'failed';

/** GET an app's `/` (undefined when nothing answers). */
export async function hit(url: string): Promise<any> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return await res.json();
  } catch {
    return undefined;
  }
}

/**
 * Whether a process is running. A zombie (dead, not yet reaped: in a container whose pid 1 does not reap,
 * an orphan stays one) counts as gone.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true; // no /proc (macOS): kill(0) is all we have
  }
}
