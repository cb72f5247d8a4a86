import { type RedeliveryOutcome, redeliverFailedDeliveries } from '../core/github/index.js';
import { webhookDeliveries } from '../ports/registry/webhook-deliveries.js';
import { log } from '../shared/log.js';

/**
 * Target of the `webhookRedelivery` schedule (functions/manifest/events.ts; not run by the local server,
 * which has no GitHub App): ask GitHub to redeliver the App's webhook deliveries that failed and that we
 * never acted on (core/webhook-redelivery.ts). The schedule's event carries nothing it needs.
 */
export async function handler(): Promise<RedeliveryOutcome> {
  const outcome = await redeliverFailedDeliveries({ deliveries: webhookDeliveries() });
  log.info('webhook redelivery', { ...outcome });
  return outcome;
}
