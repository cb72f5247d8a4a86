import type { Context } from 'aws-lambda';
import { gateLinks, syncGateOfRun } from '../core/gate/index.js';
import { sweepStaleRuns } from '../core/runs/index.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { config } from '../shared/config.js';
import { log } from '../shared/log.js';

/**
 * Target of the `runSweep` schedule (functions/manifest/events.ts; AWS only: the local server recovers
 * its runs when it starts): end `failed` the runs left `pending` or `running` past their time limit, with
 * the reason, and send the scenario `down` each owes, once (core/run-recovery.ts). The schedule's event
 * carries nothing it needs.
 */
export async function handler(
  _event?: unknown,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<{ checked: number; failed: number; downs: number }> {
  const result = await sweepStaleRuns({
    secrets: secretStore(),
    defaultRunTimeoutSeconds: config().runs.runTimeoutSeconds,
    ...(context ? { remainingMs: () => context.getRemainingTimeInMillis() } : {}),
    // Shorter than the executor's: one unanswered factory must not use the sweep's five minutes.
    factory: { retryMs: 10_000, timeoutMs: 10_000 },
    // The merge gate a swept run belonged to: completed, never left in progress.
    onEnded: (runId) => syncGateOfRun({ prStatus: prStatus(), links: gateLinks(linkSigner) }, runId),
  });
  log.info('run sweep', result);
  return result;
}
