import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { UsageError } from './args.js';

/*
 * Where previewctl's API commands go, and with which credentials: the local server `npm start` runs on
 * the data dir (its URL in server.json, the organizations' credentials in credentials.json and orgs/), or
 * the API PREVIEW_API_URL names with the credentials of PREVIEW_API_KEY, PREVIEW_CLIENT_ID and
 * PREVIEW_CLIENT_SECRET. Only node:http: no SDK, no service code.
 */

export interface Credentials {
  orgId?: string;
  apiKey?: string;
  clientId?: string;
  clientSecret?: string;
}

export interface ApiTarget {
  /** Base URL, without a trailing slash. */
  url: string;
  credentials: Credentials;
  /** Locally: the data dir and the git root the server reads repositories from. */
  local?: { dataDir: string; gitRoot: string };
}

/** An answer of the API that is not a 2xx: its status and `error`. Exit code 1. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The local data dir previewctl acts on (PREVIEW_DATA_DIR, default ./.preview-data). */
export const dataDirOf = (env: NodeJS.ProcessEnv = process.env) =>
  resolve(env.PREVIEW_DATA_DIR ?? '.preview-data');

/** The API to call and its credentials, from the environment and the data dir. */
export function resolveTarget(org: string | undefined, env: NodeJS.ProcessEnv = process.env): ApiTarget {
  const apiUrl = env.PREVIEW_API_URL;
  if (apiUrl) {
    return {
      url: apiUrl.replace(/\/+$/, ''),
      credentials: {
        orgId: org ?? env.PREVIEW_ORG,
        apiKey: env.PREVIEW_API_KEY,
        clientId: env.PREVIEW_CLIENT_ID,
        clientSecret: env.PREVIEW_CLIENT_SECRET,
      },
    };
  }
  if (env.PREVIEW_MODE === 'aws')
    throw new UsageError(
      'PREVIEW_MODE=aws: set PREVIEW_API_URL to the deployed API (the stack output ApiUrl), and ' +
        'PREVIEW_API_KEY (envs, secrets) or PREVIEW_CLIENT_ID and PREVIEW_CLIENT_SECRET (tests, runs)',
    );
  const dataDir = dataDirOf(env);
  if (!existsSync(dataDir))
    throw new Error(
      `no data dir at ${dataDir} (PREVIEW_DATA_DIR, default ./.preview-data of the current directory): ` +
        'run previewctl where `npm start` runs, or set PREVIEW_DATA_DIR to its data dir',
    );
  const info = readJson<{ pid: number; url: string; gitRoot?: string }>(join(dataDir, 'server.json'));
  if (!info || !alive(info.pid))
    throw new Error(
      `no server runs on ${dataDir}: start it with \`npm start\` (this command goes through its API), ` +
        'or set PREVIEW_API_URL',
    );
  return {
    url: info.url,
    credentials: localCredentials(dataDir, org ?? env.PREVIEW_ORG),
    local: { dataDir, gitRoot: info.gitRoot ?? join(dataDir, 'repos') },
  };
}

/**
 * The credentials of organization `org` kept in the data dir: credentials.json (the organization the
 * first start created) and orgs/ORG.json (each `previewctl orgs create`). Without `org`: the only one.
 */
export function localCredentials(dataDir: string, org: string | undefined): Credentials {
  const all: Credentials[] = [];
  const first = readJson<Credentials>(join(dataDir, 'credentials.json'));
  if (first?.orgId) all.push(first);
  const orgsDir = join(dataDir, 'orgs');
  if (existsSync(orgsDir))
    for (const f of readdirSync(orgsDir).sort()) {
      const c = f.endsWith('.json') ? readJson<Credentials>(join(orgsDir, f)) : undefined;
      if (c?.orgId && !all.some((a) => a.orgId === c.orgId)) all.push(c);
    }
  if (org !== undefined) {
    const found = all.find((c) => c.orgId === org);
    if (!found)
      throw new UsageError(
        `organization ${org} not found in ${dataDir} (known: ${all.map((c) => c.orgId).join(', ') || 'none'})`,
      );
    return found;
  }
  if (all.length === 1) return all[0]!;
  if (all.length === 0) throw new Error(`no credentials in ${dataDir}: has \`npm start\` run there once?`);
  throw new UsageError(
    `${dataDir} holds ${all.length} organizations (${all.map((c) => c.orgId).join(', ')}): ` +
      'pass --org ORG or set PREVIEW_ORG',
  );
}

function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Which credential a route takes: the API key (environments, secrets) or the client id and secret. */
export type Auth = 'apiKey' | 'client';

function authHeaders(target: ApiTarget, auth: Auth): Record<string, string> {
  const c = target.credentials;
  if (auth === 'apiKey') {
    if (!c.apiKey) throw new UsageError('no API key: set PREVIEW_API_KEY');
    return { authorization: `Bearer ${c.apiKey}` };
  }
  if (!c.clientId || !c.clientSecret)
    throw new UsageError('no client credentials: set PREVIEW_CLIENT_ID and PREVIEW_CLIENT_SECRET');
  return { 'svc-client-id': c.clientId, 'svc-client-secret': c.clientSecret };
}

/**
 * One call: the parsed JSON answer of a 2xx (`text`: the answer as it is), or an ApiError with the
 * answer's `error` (and its status). `body` is sent as JSON.
 */
// biome-ignore lint/suspicious/noExplicitAny: a JSON answer, typed by the caller.
export async function api<T = any>(
  target: ApiTarget,
  auth: Auth,
  method: string,
  path: string,
  body?: unknown,
  opts: { text?: boolean } = {},
): Promise<T> {
  const url = new URL(`${target.url}${path}`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders(target, auth) };
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const { status, text } = await new Promise<{ status: number; text: string }>((ok, fail) => {
    const req = send(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', fail);
    });
    req.on('error', (err: NodeJS.ErrnoException) =>
      fail(
        new Error(
          err.code === 'ECONNREFUSED'
            ? `cannot reach ${target.url} (connection refused): is the server running?`
            : `cannot reach ${target.url}: ${err.message}`,
        ),
      ),
    );
    req.end(payload);
  });
  let parsed: { error?: unknown } | undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (status >= 200 && status < 300) return (opts.text ? text : parsed) as T;
  const error = typeof parsed?.error === 'string' ? parsed.error : `HTTP ${status}`;
  throw new ApiError(status, error);
}

/** `/`-joined and encoded path segments. */
export const path = (...segments: (string | number)[]) =>
  segments.map((s) => encodeURIComponent(String(s))).join('/');
