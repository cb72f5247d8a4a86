import { sweepExpired, sweepFences } from '../core/environments/index.js';
import { appTeardown } from '../ports/registry/runtime/app-teardown.js';
import { workflows } from '../ports/registry/workflows.js';
import { log } from '../shared/log.js';

/**
 * Target of the `expirySweep` schedule (functions/manifest/events.ts; a timer locally): tear down the PR
 * environments idle past their application's ttl, and start again the work of environments stranded by a
 * failed start (core/expiry.ts); then remove the teardown fences that guard nothing any more
 * (`sweepFences`). The schedule's event carries nothing it needs.
 */
export async function handler(): Promise<{
  checked: number;
  expired: number;
  restarted: number;
  fencesRemoved: number;
}> {
  const { checked, expired, restarted } = await sweepExpired({ workflows: workflows() });
  const fencesRemoved = await sweepFences({ runtime: appTeardown() });
  log.info('expiry sweep', {
    checked,
    expired: expired.length,
    restarted: restarted.length,
    fencesRemoved,
  });
  return { checked, expired: expired.length, restarted: restarted.length, fencesRemoved };
}
