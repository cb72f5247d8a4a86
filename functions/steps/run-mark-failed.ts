import { gateLinks, syncGateOfRun } from '../core/gate/index.js';
import { failRun, loadRun, runFailureMessage } from '../core/runs/index.js';
import { sendOwedDown } from '../core/scenarios/index.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { log } from '../shared/log.js';

/**
 * Catch target of `testRun`: end the run `failed` with the cause, unless it already ended. A run whose
 * executor died after its scenario came up (its Lambda timed out or crashed) still owes the Environment
 * Factory its `down`: sent here, best effort and within this step's time (it is recorded on the run).
 */
export async function handler(input: {
  runId: string;
  prepared?: { attempt?: string };
  failure?: { Error?: string; Cause?: string };
}): Promise<{ runId: string }> {
  await failRun(input.runId, runFailureMessage(input.failure), { attempt: input.prepared?.attempt });
  try {
    const run = await loadRun(input.runId);
    if (run)
      await sendOwedDown({ secrets: secretStore() }, run, {
        retryMs: 20_000,
        timeoutMs: 15_000,
        by: 'mark-failed',
      });
  } catch (err) {
    log.warn('could not send an owed scenario down', { runId: input.runId, error: (err as Error).name });
  }
  await syncGateOfRun({ prStatus: prStatus(), links: gateLinks(linkSigner) }, input.runId);
  return { runId: input.runId };
}
