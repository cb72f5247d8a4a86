import { keys, tables } from '../../manifest/tables.js';
import { countItems, queryItems, table, updateIf } from '../../shared/aws/dynamo.js';
import { config } from '../../shared/config.js';
import { TooManyRequestsError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';

/*
 * Each organization's fair share of the service, so that one tenant's storm of polls, deploys or runs
 * cannot use every other tenant's share (API Gateway's own throttle is per stage, for everyone at once).
 * Three limits, each answering 429 with `Retry-After` and a message that names it (docs/scale.md):
 *
 * - Requests (`PREVIEW_ORG_REQUESTS_PER_SECOND`, default 20): counted per organization in fixed windows of
 *   WINDOW_SECONDS in the `quotas` table (one item per organization and window, expired by TTL). A
 *   container does not write once per request: it leases tokens from the window's counter, 1 at first and
 *   then twice as many each time it runs out (up to MAX_LEASE), with one conditional ADD that never takes
 *   the counter past the window's budget. A quiet organization costs a write per request; a busy one a
 *   write per dozen requests per container, off the request path: once a window has needed a third
 *   lease, the next one is taken ahead, in the background, when PREFETCH_AT tokens or fewer are left,
 *   so a request with budget left never waits for a write (only one that finds none left waits, for the
 *   lease in flight or its own). A container never holds more than MAX_LEASE − 1 unused tokens: what it
 *   leased and did not use when the window ends is lost (at most MAX_LEASE − 1 per container and
 *   window), so a burst spread over many containers gets somewhat less than the budget, never more. A fixed window admits up to twice the budget across
 *   a window boundary; that is the price of one write for many requests.
 * - Deploys in flight (`PREVIEW_ORG_CONCURRENT_DEPLOYS`, default 20): environments pending, building or
 *   deploying, counted when a caller asks for one more (a redeploy of an environment already in flight
 *   takes no new slot). Counting reads the organization's environments (one Query; a filter, so it costs
 *   what the partition holds): paid per deploy request, not per poll.
 * - Runs in flight (`PREVIEW_ORG_CONCURRENT_RUNS`, default 10): runs pending or running, counted on the
 *   runs' `listStatus` index (keys only, two small Queries) when a caller starts one.
 *
 * The limits apply to callers of the API (API key, client credentials). GitHub webhooks, EventBridge
 * events and the service's own steps are not limited: they have no caller to retry, and GitHub's own
 * rate bounds them. A limit set to 0 is off. The request limiter fails open: when its table cannot be
 * written (an outage, throttling), the request goes on and a warning is logged.
 */

/** Length of a request-counting window. */
export const WINDOW_SECONDS = 10;
/** Most tokens a container leases at once. */
export const MAX_LEASE = 16;
/** A lease is taken ahead, off the request path, when this many tokens or fewer are left. */
export const PREFETCH_AT = MAX_LEASE / 4;
/** Retry-After of a concurrency limit: the time a deploy or run typically takes to settle. */
const SLOT_RETRY_SECONDS = 30;
/** Leases kept per container (organizations), oldest dropped first. */
const LEASES_MAX = 10_000;

interface Lease {
  window: number;
  left: number;
  next: number;
  /** The lease being taken ahead (`leaseAhead`), while it is in flight. */
  ahead?: Promise<void>;
}
const leases = new Map<string, Lease>();

/** Forget every lease (tests). */
export function resetLeases(): void {
  leases.clear();
}

/** The request budget of one window, for a rate per second. */
export const windowBudget = (perSecond: number) => Math.max(1, Math.floor(perSecond * WINDOW_SECONDS));

/** Each limit's setting: the environment variable, and the CDK context key that sets it in AWS. */
export const FAIR_SHARE_SETTINGS = {
  requestsPerSecond: { env: 'PREVIEW_ORG_REQUESTS_PER_SECOND', context: 'orgRequestsPerSecond' },
  concurrentDeploys: { env: 'PREVIEW_ORG_CONCURRENT_DEPLOYS', context: 'orgConcurrentDeploys' },
  concurrentRuns: { env: 'PREVIEW_ORG_CONCURRENT_RUNS', context: 'orgConcurrentRuns' },
} as const;

/**
 * What raises a limit, as a 429 says it to whoever runs the service: locally the environment variable
 * of `npm start`, in AWS the stack's context key (the functions' variable is set from it at deploy).
 */
export function raisedBy(
  limit: keyof typeof FAIR_SHARE_SETTINGS,
  mode: 'aws' | 'local' = config().mode,
): string {
  const s = FAIR_SHARE_SETTINGS[limit];
  return mode === 'local'
    ? `${s.env} raises this limit (0 turns it off)`
    : `the deploy's context key ${s.context} raises this limit (cdk deploy -c ${s.context}=N; 0 turns it off)`;
}

/** The limits in force, as `npm start` prints them. */
export function describeFairShare(f = config().fairShare): string {
  const one = (n: number, what: string, limit: keyof typeof FAIR_SHARE_SETTINGS) =>
    `${n > 0 ? `${n} ${what}` : `no limit of ${what}`} (${FAIR_SHARE_SETTINGS[limit].env})`;
  return (
    `fair share per organization: ${one(f.requestsPerSecond, 'requests/s', 'requestsPerSecond')}, ` +
    `${one(f.concurrentDeploys, 'deploys in flight', 'concurrentDeploys')}, ` +
    `${one(f.concurrentRuns, 'runs in flight', 'concurrentRuns')}; past one, 429 (0 turns a limit off)`
  );
}

/**
 * Count one request of `orgId` against its budget; TooManyRequestsError once the window's budget is
 * spent, with the seconds until the next window.
 */
export async function takeRequest(orgId: string, nowMs = Date.now()): Promise<void> {
  const perSecond = config().fairShare.requestsPerSecond;
  if (perSecond <= 0 || !orgId) return;
  const budget = windowBudget(perSecond);
  const window = Math.floor(nowMs / 1000 / WINDOW_SECONDS) * WINDOW_SECONDS;
  let lease = leases.get(orgId);
  if (!lease || lease.window !== window) {
    if (!lease && leases.size >= LEASES_MAX) leases.delete(leases.keys().next().value as string);
    lease = { window, left: 0, next: 1 };
    leases.set(orgId, lease);
  }
  if (lease.left === 0 && lease.ahead) await lease.ahead;
  if (lease.left > 0) {
    lease.left--;
    leaseAhead(orgId, lease, budget);
    return;
  }
  const want = Math.min(lease.next, MAX_LEASE, budget);
  let got = 0;
  try {
    if (await leaseTokens(orgId, window, want, budget)) got = want;
    else if (want > 1 && (await leaseTokens(orgId, window, 1, budget))) got = 1;
  } catch (err) {
    log.warn('request limiter unavailable: request admitted', { orgId, error: (err as Error).name });
    return;
  }
  if (got === 0) {
    const retry = Math.max(1, Math.ceil(window + WINDOW_SECONDS - nowMs / 1000));
    throw new TooManyRequestsError(
      `too many requests: this organization may make ${budget} requests per ${WINDOW_SECONDS} seconds (${perSecond}/s); retry after ${retry} s; ${raisedBy('requestsPerSecond')}`,
      retry,
    );
  }
  // Concurrent requests may have waited on the same empty lease: each adds what it got.
  lease.left += got - 1;
  lease.next = Math.min(MAX_LEASE, lease.next * 2);
  leaseAhead(orgId, lease, budget);
}

/**
 * Take the window's next lease in the background when few tokens are left (`PREFETCH_AT`), the window has
 * needed a third lease (a busy organization: a quiet one is not leased ahead) and none is in flight; never
 * more than keeps the container's unused tokens under MAX_LEASE. A lease refused (the budget is nearly
 * spent) or failing adds nothing: the request that finds no token left leases for itself, one token at
 * the end, or fails open.
 */
function leaseAhead(orgId: string, lease: Lease, budget: number): void {
  if (lease.ahead || lease.left > PREFETCH_AT || lease.next <= 2) return;
  const want = Math.min(lease.next, MAX_LEASE - 1 - lease.left, budget);
  if (want <= 0) return;
  lease.ahead = leaseTokens(orgId, lease.window, want, budget)
    .then(
      (ok) => {
        if (!ok) return;
        lease.left += want;
        lease.next = Math.min(MAX_LEASE, lease.next * 2);
      },
      (err) => log.warn('request limiter: a lease taken ahead failed', { orgId, error: (err as Error).name }),
    )
    .finally(() => {
      lease.ahead = undefined;
    });
}

/** Add `n` to the window's counter unless that takes it past `budget`; false when it would. */
async function leaseTokens(orgId: string, window: number, n: number, budget: number): Promise<boolean> {
  return updateIf({
    TableName: table('quotas'),
    Key: { pk: keys.quotas.rate(orgId, window) },
    UpdateExpression: 'ADD #taken :n SET #exp = if_not_exists(#exp, :exp)',
    ConditionExpression: 'attribute_not_exists(#taken) OR #taken <= :room',
    ExpressionAttributeNames: { '#taken': 'taken', '#exp': tables.quotas.ttlAttribute },
    ExpressionAttributeValues: { ':n': n, ':room': budget - n, ':exp': window + 2 * WINDOW_SECONDS },
  });
}

const IN_FLIGHT_ENV = ['pending', 'building', 'deploying'];

/**
 * Refuse a deploy that would put the organization past its deploys in flight. `envKey`: the environment
 * the deploy is for; when it is in flight itself, the deploy supersedes it and needs no new slot.
 */
export async function assertDeploySlot(orgId: string, envKey?: string): Promise<void> {
  const max = config().fairShare.concurrentDeploys;
  if (max <= 0) return;
  let inFlight = 0;
  for await (const item of queryItems<{ envKey: string }>({
    TableName: table('environments'),
    KeyConditionExpression: 'orgId = :o',
    FilterExpression: '#s IN (:p, :b, :d)',
    ProjectionExpression: 'envKey',
    ExpressionAttributeNames: { '#s': 'status' },
    ExpressionAttributeValues: { ':o': orgId, ':p': 'pending', ':b': 'building', ':d': 'deploying' },
  })) {
    if (item.envKey === envKey) return;
    inFlight++;
  }
  if (inFlight >= max)
    throw new TooManyRequestsError(
      `too many deploys in flight: this organization has ${inFlight} (${IN_FLIGHT_ENV.join(', ')}), at most ${max}; retry when one is ready or failed; ${raisedBy('concurrentDeploys')}`,
      SLOT_RETRY_SECONDS,
    );
}

/** Refuse a run that would put the organization past its runs in flight (pending or running). */
export async function assertRunSlot(orgId: string): Promise<void> {
  const max = config().fairShare.concurrentRuns;
  if (max <= 0) return;
  let inFlight = 0;
  for (const status of ['pending', 'running']) {
    if (inFlight >= max) break;
    inFlight += await countItems(
      {
        TableName: table('runs'),
        IndexName: 'listStatus',
        KeyConditionExpression: 'statusKey = :k',
        ExpressionAttributeValues: { ':k': keys.runs.byStatus(orgId, status) },
        Limit: max,
      },
      max - inFlight,
    );
  }
  if (inFlight >= max)
    throw new TooManyRequestsError(
      `too many runs in flight: this organization has ${inFlight} pending or running, at most ${max}; retry when one ends; ${raisedBy('concurrentRuns')}`,
      SLOT_RETRY_SECONDS,
    );
}
