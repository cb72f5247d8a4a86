import type { SecretStore } from '../../../ports/secret-store/port.js';
import { log } from '../../../shared/log.js';
import { sendOwedDown } from '../../scenarios/index.js';
import { failRun, RunNotOwned } from '../lifecycle.js';
import { loadRun, updateRunIf } from '../store.js';

/*
 * One executor per run attempt, even under retries. Step Functions retries the Execute task on a Lambda
 * service error, and the first invocation may still be running (or may have died after the scenario's
 * `up`): a retry must never run the steps again beside it, nor send a second `up`. So an executor first
 * claims the attempt with a lease (a conditional write of `executor` and `executorLeaseUntil`: its own
 * invocation id and its Lambda's deadline); a retry that finds another invocation's claim waits for the
 * run to end, and when the lease passes with the run still `running` (that executor died), ends it
 * `failed` saying so and sends the `down` it owes (claimed, so once).
 */

export type ExecutorClaim = { claimed: true } | { claimed: false; heldBy: string; leaseUntil: number };

/**
 * Claim run `runId`'s attempt `attempt` for invocation `invocation` until `leaseUntil` (epoch ms). The
 * same invocation claiming again keeps its claim. Throws RunNotOwned when the run is no longer `running`
 * under that attempt.
 */
export async function claimExecutor(
  runId: string,
  attempt: string,
  invocation: string,
  leaseUntil: number,
): Promise<ExecutorClaim> {
  const claimed = await updateRunIf(runId, {
    UpdateExpression: 'SET executor = :me, executorLeaseUntil = :until',
    ConditionExpression:
      '#status = :running AND attempt = :attempt AND (attribute_not_exists(executor) OR executor = :me)',
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: {
      ':me': invocation,
      ':until': leaseUntil,
      ':running': 'running',
      ':attempt': attempt,
    },
  });
  if (claimed) return { claimed: true };
  const run = (await loadRun(runId)) as
    | (Awaited<ReturnType<typeof loadRun>> & { executor?: string; executorLeaseUntil?: number })
    | undefined;
  if (run?.status !== 'running' || run.attempt !== attempt)
    throw new RunNotOwned(`run ${runId} is no longer run by attempt ${attempt}`);
  return { claimed: false, heldBy: String(run.executor), leaseUntil: Number(run.executorLeaseUntil ?? 0) };
}

/** The error of a run whose executor stopped after it began (a retry of Execute found it so). */
export const EXECUTOR_DIED =
  "the run's executor stopped before it ended (Step Functions retried it after a Lambda error); its " +
  'steps are not run again, since they may already have acted on the app: start the run again';

/**
 * A retried Execute that found another invocation's claim: wait (polling every `pollMs`) until the run
 * ends, or its lease passes with the run still `running`, then end it `failed` (EXECUTOR_DIED) and send
 * its owed `down`. Never waits past `until` (this invocation's own deadline): the run is then left to
 * MarkFailed and the sweep. Returns the run's outcome.
 */
export async function awaitOtherExecutor(
  deps: { secrets: SecretStore; now?: () => number; pollMs?: number },
  input: { runId: string; attempt: string; leaseUntil: number; until: number },
): Promise<'passed' | 'failed'> {
  const now = deps.now ?? Date.now;
  const pollMs = deps.pollMs ?? 2_000;
  log.info('run attempt already has an executor: waiting for it', { runId: input.runId });
  for (;;) {
    const run = await loadRun(input.runId);
    if (!run || run.attempt !== input.attempt)
      throw new RunNotOwned(`run ${input.runId} is no longer run by attempt ${input.attempt}`);
    if (run.status === 'passed' || run.status === 'failed') return run.status;
    const leaseUntil = Number(
      (run as { executorLeaseUntil?: number }).executorLeaseUntil ?? input.leaseUntil,
    );
    if (now() >= leaseUntil) {
      await failRun(input.runId, EXECUTOR_DIED, { attempt: input.attempt });
      const ended = await loadRun(input.runId);
      if (ended?.scenarioState)
        await sendOwedDown({ secrets: deps.secrets }, ended, { by: 'executor-retry' }).catch((err) =>
          log.warn('could not send an owed scenario down', {
            runId: input.runId,
            error: (err as Error).name,
          }),
        );
      return ended?.status === 'passed' ? 'passed' : 'failed';
    }
    if (now() + pollMs >= input.until)
      throw new RunNotOwned(
        `run ${input.runId} is still run by another executor of attempt ${input.attempt}`,
      );
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
