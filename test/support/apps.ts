import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { bearer, call } from './api.js';

/**
 * A tiny app for preview.yaml fixtures: listens on $PORT, answers /healthz, and `/` with what a test
 * checks: its name, pid, the env vars named in SHOW, and the stamp its build wrote.
 */
export const SERVER_JS = `
const http = require('node:http');
const fs = require('node:fs');
const name = process.argv[2] || 'app';
const show = (process.env.SHOW || '').split(',').filter(Boolean);
let pidns = null;
try { pidns = fs.readlinkSync('/proc/self/ns/pid'); } catch {}
http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  const stamp = fs.existsSync('stamp-' + name) ? fs.readFileSync('stamp-' + name, 'utf8') : null;
  const env = Object.fromEntries(show.map((k) => [k, process.env[k] ?? null]));
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ app: name, pid: process.pid, pidns, env, stamp, version: fs.readFileSync('VERSION', 'utf8').trim() }));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

/** Writes `stamp-<name>` with a random value: each build is recognizable. */
export const BUILD_JS = `require('node:fs').writeFileSync('stamp-' + process.argv[2], String(Math.random()));`;

/**
 * A preview.yaml of two apps built by BUILD_JS and run by SERVER_JS: `web` on port 3000 and `api` on 4000,
 * each with the lines `more` gives it (`health: /healthz`, `env: …`).
 */
export function twoApps(more: { web?: string[]; api?: string[] } = {}): string {
  const app = (name: 'web' | 'api', port: number) =>
    [
      `  ${name}:`,
      `    port: ${port}`,
      `    build: node build.js ${name}`,
      `    command: node server.js ${name}`,
    ]
      .concat((more[name] ?? []).map((line) => `    ${line}`))
      .join('\n');
  return `apps:\n${app('web', 3000)}\n${app('api', 4000)}\n`;
}

export type Status = {
  status: string;
  phase?: string;
  urls: Record<string, string>;
  error?: string;
  lastDeployedSha?: string;
};

/** Poll an environment until `done` says so (or fail after `timeoutMs`), like a caller would. */
export async function pollUntil(
  h: { url: string },
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

/**
 * GET an app's `/` (undefined when nothing answers). The `pid` in the answer is the app's pid on this
 * machine, also when it runs in a PID namespace of its own (an isolated runtime), where it reports the
 * namespace's pid: see `hostPid`.
 */
export async function hit(url: string): Promise<any> {
  let answer: any;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    answer = await res.json();
  } catch {
    return undefined;
  }
  if (answer && typeof answer === 'object' && 'pidns' in answer) {
    const { pidns, ...rest } = answer;
    if (typeof rest.pid === 'number') rest.pid = hostPid(rest.pid, pidns);
    return rest;
  }
  return answer;
}

/**
 * The pid on this machine of the process that is `pid` in the PID namespace `pidns` (as
 * `readlink /proc/self/ns/pid` names it: `pid:[4026532...]`). The same pid when `pidns` is ours or
 * unknown; -1 when no such process is alive (Linux: found through /proc).
 */
export function hostPid(pid: number, pidns: string | null | undefined): number {
  if (!pidns) return pid;
  let own: string | undefined;
  try {
    own = readlinkSync('/proc/self/ns/pid');
  } catch {
    return pid;
  }
  if (pidns === own) return pid;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) !== pidns) continue;
      const nspid = /^NSpid:\s+(.*)$/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1];
      if (Number(nspid?.trim().split(/\s+/).pop()) === pid) return Number(entry);
    } catch {
      // gone meanwhile, or not ours to look at
    }
  }
  return -1;
}

/**
 * A build command that writes `<namespace> <pid>` of its process to `file` (relative: in its working
 * copy, the only place an isolated build can write) and then runs for `ms`. `readBuildPid` turns what it
 * wrote into the pid on this machine.
 */
export const pidFileBuild = (file: string, ms: number) =>
  `node -e "const fs=require('fs');let ns='';try{ns=fs.readlinkSync('/proc/self/ns/pid')}catch{}` +
  `fs.writeFileSync('${file}', ns+' '+process.pid);setTimeout(()=>{},${ms})"`;

/** The host pid a `pidFileBuild` wrote to `path` (-1 when that process is gone). */
export function readBuildPid(path: string): number {
  const [ns, pid] = readFileSync(path, 'utf8').trim().split(' ');
  return ns && pid ? hostPid(Number(pid), ns) : Number(ns);
}

/**
 * Wait until a `pidFileBuild` under `root` (an environment's working copies, `<work dir>/<org>/<owner>/
 * <repo>/<pr>`, or any folder above them) has written `file`, and return the build's host pid.
 */
export async function waitForBuildPid(root: string, file: string, ms = 10_000): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = existsSync(root)
      ? readdirSync(root, { recursive: true, encoding: 'utf8' }).find(
          (rel) => rel === file || rel.endsWith(`/${file}`),
        )
      : undefined;
    if (found && readFileSync(join(root, found), 'utf8') !== '') return readBuildPid(join(root, found));
    if (Date.now() > deadline) throw new Error(`no ${file} under ${root} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
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
