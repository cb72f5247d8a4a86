import {
  liveEnvironments,
  type Resumption,
  resumeEnvironment,
} from '../../functions/core/environments/index.js';
import { gateLinks, syncGateOfRun } from '../../functions/core/gate/index.js';
import { recoverRuns } from '../../functions/core/runs/index.js';
import { linkSigner, prStatus, secretStore } from '../../functions/ports/registry.js';
import type { ProcessRuntime } from '../../functions/ports/runtime/local/process.js';
import type { Workflows } from '../../functions/ports/workflows/port.js';
import { log } from '../../functions/shared/log.js';

/**
 * On local server start: whatever the last run left is brought back to a true state. The runtime first
 * kills processes a crash orphaned (and forgets what ran); then every environment not torn down is
 * resumed (`resumeEnvironment`): in-flight deploys and teardowns start again at their generation, ready
 * environments restart their apps from their builds. Runs in the background; returns the tally.
 */
export async function recoverEnvironments(
  workflows: Workflows,
  runtime: ProcessRuntime,
): Promise<Record<Resumption, number> & { orphansKilled: number }> {
  const tally = { 'resumed-deploy': 0, 'resumed-teardown': 0, restarted: 0, unchanged: 0, orphansKilled: 0 };
  tally.orphansKilled = runtime.recover();
  for await (const env of liveEnvironments()) {
    try {
      tally[await resumeEnvironment(workflows, env)]++;
    } catch (err) {
      log.error('could not resume environment', { envKey: env.envKey, error: (err as Error).message });
    }
  }
  // Runs the previous run left pending or running end `failed` with the reason (their browser is gone);
  // one whose scenario came up sends the factory its owed `down` (scenario data).
  // The merge gate each belonged to completes its check run (never left in progress by a crash).
  const runs = await recoverRuns({
    secrets: secretStore(),
    onEnded: (runId) => syncGateOfRun({ prStatus: prStatus(), links: gateLinks(linkSigner) }, runId),
  });
  if (runs.failed > 0) log.info('local recovery: runs ended', runs);
  const { unchanged: _unchanged, ...changed } = tally;
  if (Object.values(changed).some((n) => n > 0)) log.info('local recovery', tally);
  return tally;
}
