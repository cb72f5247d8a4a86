import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import type { HookDelivery, WebhookDeliveries } from '../../ports/source-host/port.js';
import { ddb, table } from '../../shared/aws/dynamo.js';
import { log } from '../../shared/log.js';

/*
 * Failed webhook deliveries, asked for again. GitHub does not redeliver a delivery we failed to take (a
 * 5xx: `receiveWebhook` released its claim because the bus refused its events; a timeout; our outage); it
 * only keeps a record of every attempt and redelivers one when asked. The `webhookRedelivery` schedule
 * (functions/manifest/events.ts) runs `redeliverFailedDeliveries`: list the App's recent attempts, and ask
 * again for each delivery (GUID) that no attempt delivered and we never claimed, a few times at most. A
 * redelivery carries the same GUID, so `receiveWebhook`'s claim still keeps it from acting twice.
 */

/** How far back the attempts are read (GitHub keeps them, and redelivers them, for three days). */
export const REDELIVERY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** Redeliveries asked per delivery before it is given up (a warning names its GUID). */
export const MAX_REDELIVERIES = 3;
/** Redeliveries asked per run at most; the rest wait for the next run. */
export const MAX_REDELIVERIES_PER_RUN = 25;
/** Attempts read per run at most, whatever the window (a guard against a runaway listing). */
export const MAX_ATTEMPTS_LISTED = 3000;

export interface RedeliveryDeps {
  deliveries: WebhookDeliveries;
  /**
   * Whether the `deliveries` table holds a claim for this GUID (we acted on the delivery, whatever GitHub
   * recorded: it timed out, say). Default: a consistent read of the table.
   */
  claimed?: (guid: string) => Promise<boolean>;
  /** Bounds, for tests (defaults above). */
  windowMs?: number;
  maxRedeliveries?: number;
  maxPerRun?: number;
}

export interface RedeliveryOutcome {
  /** Deliveries (GUIDs) seen in the window. */
  checked: number;
  /** Redeliveries asked for in this run. */
  redelivered: number;
  /** Failed deliveries not asked for again: they had their redeliveries. */
  gaveUp: number;
}

async function claimedInTable(guid: string): Promise<boolean> {
  const out = await ddb().send(
    new GetCommand({
      TableName: table('deliveries'),
      Key: { deliveryId: keys.deliveries.github(guid) },
      ConsistentRead: true,
      ProjectionExpression: 'deliveryId',
    }),
  );
  return out.Item !== undefined;
}

const delivered = (a: HookDelivery) => a.statusCode >= 200 && a.statusCode < 300;
/**
 * Whether the same delivery may fare better another time: no answer (a timeout: status 0), a 5xx, 408 or
 * 429. Any other 4xx is our verdict on the delivery itself (a bad signature, a payload without what is
 * read): asking again would get the same answer.
 */
const worthRetrying = (a: HookDelivery) =>
  a.statusCode === 0 || a.statusCode >= 500 || a.statusCode === 408 || a.statusCode === 429;

/**
 * Ask the source host to redeliver the failed deliveries of the window (`now` minus the window): those
 * whose every attempt failed (no 2xx) and whose latest one may fare better another time (no answer, 5xx,
 * 408, 429: not our 4xx verdict), that the `deliveries` table has no claim for, and that had fewer
 * than `maxRedeliveries` redeliveries (else given up, with a warning naming the GUID). The latest attempt
 * is the one redelivered; newest deliveries first, `maxPerRun` at most. Logs ids and counts, never
 * payloads.
 */
export async function redeliverFailedDeliveries(
  deps: RedeliveryDeps,
  now = new Date(),
): Promise<RedeliveryOutcome> {
  const since = new Date(now.getTime() - (deps.windowMs ?? REDELIVERY_WINDOW_MS));
  const maxRedeliveries = deps.maxRedeliveries ?? MAX_REDELIVERIES;
  const maxPerRun = deps.maxPerRun ?? MAX_REDELIVERIES_PER_RUN;
  const claimed = deps.claimed ?? claimedInTable;

  // Newest first: a Map keeps the GUIDs in the order of their latest attempt.
  const byGuid = new Map<string, HookDelivery[]>();
  let listed = 0;
  for await (const attempt of deps.deliveries.recent(since)) {
    if (Date.parse(attempt.deliveredAt) < since.getTime()) break;
    const attempts = byGuid.get(attempt.guid);
    if (attempts) attempts.push(attempt);
    else byGuid.set(attempt.guid, [attempt]);
    if (++listed >= MAX_ATTEMPTS_LISTED) break;
  }

  let redelivered = 0;
  let gaveUp = 0;
  for (const [guid, attempts] of byGuid) {
    if (redelivered >= maxPerRun) {
      // The rest (older) wait for the next run; so do their claim lookups.
      log.info('webhook redeliveries: the per-run bound was reached', { maxPerRun });
      break;
    }
    if (attempts.some(delivered)) continue;
    const latest = attempts.reduce((a, b) => (Date.parse(b.deliveredAt) > Date.parse(a.deliveredAt) ? b : a));
    if (!worthRetrying(latest)) continue;
    if (await claimed(guid)) continue;
    const redeliveries = attempts.filter((a) => a.redelivery).length;
    if (redeliveries >= maxRedeliveries) {
      gaveUp++;
      log.warn('webhook delivery given up: every attempt failed', {
        guid,
        attempts: attempts.length,
        event: attempts[0]!.event,
      });
      continue;
    }
    await deps.deliveries.redeliver(latest.id);
    redelivered++;
    log.info('webhook redelivery requested', {
      guid,
      attemptId: latest.id,
      statusCode: latest.statusCode,
      redeliveries,
    });
  }
  return { checked: byGuid.size, redelivered, gaveUp };
}
