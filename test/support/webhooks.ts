import { createHmac, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ApiResponse, call } from './api.js';

/* Helpers for the webhook tests: GitHub's payloads (the fields the service reads), signed deliveries. */

export const sign = (secret: string, body: string): string =>
  `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;

export interface DeliveryOptions {
  /** `X-GitHub-Delivery` (a fresh GUID by default). */
  id?: string;
  /** The secret to sign with (the right one by default). */
  secret?: string;
  /** Sent as is instead of the computed signature; `null`: no signature header. */
  signature?: string | null;
  /** The body sent, when it is to differ from the one signed. */
  sentBody?: string;
}

/** POST one delivery to the webhook route, signed as GitHub signs it. */
export async function deliver(
  h: { url: string },
  secret: string,
  event: string,
  payload: unknown,
  opts: DeliveryOptions = {},
): Promise<ApiResponse & { deliveryId: string }> {
  const body = JSON.stringify(payload);
  const deliveryId = opts.id ?? randomUUID();
  const signature = opts.signature === undefined ? sign(opts.secret ?? secret, body) : opts.signature;
  const res = await call(h, 'POST', '/v1/github/webhooks', {
    body: opts.sentBody ?? body,
    headers: {
      'x-github-event': event,
      'x-github-delivery': deliveryId,
      'user-agent': 'GitHub-Hookshot/test',
      ...(signature === null ? {} : { 'x-hub-signature-256': signature }),
    },
  });
  return { ...res, deliveryId };
}

let clock = Date.parse('2030-01-01T00:00:00Z');
/** GitHub's `updated_at`: one second later on every call (events of one PR arrive in order). */
export const tick = (): string => {
  clock += 1000;
  return new Date(clock).toISOString().replace('.000Z', 'Z');
};

export interface PrOptions {
  number: number;
  sha: string;
  repo?: string;
  ref?: string;
  baseSha?: string;
  draft?: boolean;
  /** The head repository when it is a fork (`mallory/shop`). */
  forkOf?: string;
  merged?: boolean;
  installationId?: number;
}

export function prPayload(action: string, o: PrOptions) {
  const repo = o.repo ?? 'acme/shop';
  return {
    action,
    number: o.number,
    pull_request: {
      number: o.number,
      state: action === 'closed' ? 'closed' : 'open',
      draft: o.draft ?? false,
      merged: o.merged ?? false,
      updated_at: tick(),
      head: { sha: o.sha, ref: o.ref ?? `feature-${o.number}`, repo: { full_name: o.forkOf ?? repo } },
      base: { sha: o.baseSha ?? o.sha, ref: 'main', repo: { full_name: repo } },
    },
    repository: { full_name: repo, default_branch: 'main' },
    installation: { id: o.installationId ?? 1 },
    sender: { login: 'octocat' },
  };
}

export function pushPayload(branch: string, sha: string, repo = 'acme/shop', installationId = 1) {
  return {
    ref: `refs/heads/${branch}`,
    before: '0'.repeat(40),
    after: sha,
    deleted: false,
    repository: { full_name: repo, default_branch: 'main', pushed_at: Math.floor(Date.now() / 1000) },
    installation: { id: installationId },
  };
}

/** One write GitHub would have received, as the local outbox recorded it. */
export interface OutboxCall {
  method: string;
  path: string;
  body: Record<string, any>;
  response: { status: number; id?: number };
}

/** The outbox's lines (every write the service would have sent GitHub). */
export function outbox(dataDir: string): OutboxCall[] {
  const path = join(dataDir, 'github-outbox.jsonl');
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as OutboxCall);
}

/** The deployment statuses the outbox holds for a deployment environment, in order. */
export function deploymentStates(
  dataDir: string,
  repo: string,
  environment: string,
): { state: string; body: any }[] {
  const calls = outbox(dataDir);
  const ids = new Set(
    calls
      .filter((c) => c.path === `/repos/${repo}/deployments` && c.body.environment === environment)
      .map((c) => c.response.id),
  );
  return calls
    .filter((c) => {
      const m = /\/deployments\/(\d+)\/statuses$/.exec(c.path);
      return m && ids.has(Number(m[1]));
    })
    .map((c) => ({ state: c.body.state as string, body: c.body }));
}

/** The PR comment's latest body, as the outbox holds it. */
export function lastComment(dataDir: string, repo: string, pr: number): string | undefined {
  const calls = outbox(dataDir);
  const created = calls.filter((c) => c.path === `/repos/${repo}/issues/${pr}/comments`);
  const ids = new Set(created.map((c) => c.response.id));
  const bodies = calls
    .filter(
      (c) => created.includes(c) || (/\/issues\/comments\/(\d+)$/.test(c.path) && ids.has(c.response.id)),
    )
    .map((c) => c.body.body as string);
  return bodies.at(-1);
}

/** The PR's comment once it says `text`: the comment follows the status by a bus event, so a caller waits. */
export async function commentSaying(dataDir: string, repo: string, pr: number, text: string, ms = 15_000) {
  const deadline = Date.now() + ms;
  let last = lastComment(dataDir, repo, pr);
  while (!last?.includes(text) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    last = lastComment(dataDir, repo, pr);
  }
  return last;
}
