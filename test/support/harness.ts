import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createApplication,
  createOrganization,
  findApplicationByRepo,
  type OrgCredentials,
} from '../../functions/core/applications/applications.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';

/**
 * Integration harness: the very local server `npm start` runs, on a free port, with a fresh data dir.
 * Log lines are captured (tests assert secrets never reach them). One server per test file.
 */
export interface Harness {
  service: LocalService;
  url: string;
  dataDir: string;
  /** The org created on first start. */
  org: OrgCredentials;
  logs: string[];
  /** A further organization (for cross-organization tests). */
  newOrg(name?: string): Promise<OrgCredentials>;
  stop(): Promise<void>;
}

export async function startHarness(opts: { gitRoot?: string } = {}): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preview-it-'));
  const logs: string[] = [];
  setLogSink((line) => logs.push(line));
  // Working copies inside the (temporary) data dir, so stop() removes them too; restored by stop().
  const workDirVar = process.env.PREVIEW_WORK_DIR;
  process.env.PREVIEW_WORK_DIR = join(dataDir, 'work');
  const service = await startLocal({ dataDir, port: 0, gitRoot: opts.gitRoot });
  return {
    service,
    url: service.url,
    dataDir,
    org: service.credentials,
    logs,
    newOrg: (name = 'other') => createOrganization(name),
    stop: async () => {
      await service.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (workDirVar === undefined) delete process.env.PREVIEW_WORK_DIR;
      else process.env.PREVIEW_WORK_DIR = workDirVar;
    },
  };
}

/**
 * The application of `org` linked to `repoFullName`, created when there is none (a deploy needs one).
 * Returns its id.
 */
export async function linkRepo(org: { orgId: string }, repoFullName: string): Promise<string> {
  const existing = await findApplicationByRepo(org.orgId, repoFullName);
  if (existing) return existing.applicationId;
  return (await createApplication({ orgId: org.orgId, repoFullName })).applicationId;
}

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

/** Real HTTP to the local server. `body` objects are JSON-encoded; strings are sent as they are. */
export async function call<T = any>(
  h: { url: string },
  method: string,
  path: string,
  opts: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...opts.headers },
    body:
      opts.body === undefined
        ? undefined
        : typeof opts.body === 'string'
          ? opts.body
          : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text, headers: res.headers };
}

/** Headers for the preview, secrets and recipe routes. */
export const bearer = (org: OrgCredentials) => ({ authorization: `Bearer ${org.apiKey}` });
/** Headers for the test and run routes. */
export const client = (org: OrgCredentials) => ({
  'svc-client-id': org.clientId,
  'svc-client-secret': org.clientSecret,
});
