import { sweepExpired } from '../core/expiry.js';
import { workflows } from '../ports/registry/workflows.js';
import { log } from '../shared/log.js';

/**
 * Target of the `expirySweep` schedule (functions/manifest/events.ts; a timer locally): tear down the PR
 * environments idle past their application's ttl. The schedule's event carries nothing it needs.
 */
export async function handler(): Promise<{ checked: number; expired: number }> {
  const { checked, expired } = await sweepExpired({ workflows: workflows() });
  log.info('expiry sweep', { checked, expired: expired.length });
  return { checked, expired: expired.length };
}
