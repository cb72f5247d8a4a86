import {
  createApplication,
  findApplicationByRepo,
  type OrgCredentials,
} from '../../functions/core/applications/applications.js';

/*
 * Talking to the service as its callers do: real HTTP to a base URL (the local server, the cloud tier's
 * front), the credentials each route group wants, and an application linked to a repository. No Jest
 * here: the benchmarks and the cloud tier use it too. Starting the local server: local-server.ts.
 */

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
