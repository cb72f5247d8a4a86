/**
 * The Workflows port: starts state machine executions and ends their callback tasks. Adapters:
 * `step-functions.ts` (AWS Step Functions), `local-asl.ts` (the same ASL files, run in-process).
 */
import type { WorkflowName } from '../../manifest/workflows.js';

export type { WorkflowName } from '../../manifest/workflows.js';

export interface Workflows {
  /**
   * Start an execution and return without waiting for it. `name` is unique per execution and makes a
   * retried start idempotent in Step Functions.
   */
  start(
    workflow: WorkflowName,
    input: Record<string, unknown>,
    name: string,
  ): Promise<{ executionId: string }>;
  /**
   * Complete a task waiting on a callback (a `.waitForTaskToken` state): success with its output, or
   * failure with an error name the state machine's Retry/Catch match on and a human-readable cause.
   * A token whose task already ended (timed out, aborted, completed) is ignored.
   */
  completeTask(token: string, outcome: TaskOutcome): Promise<void>;
  /**
   * Tell a waiting callback task its work is still alive (states with `HeartbeatSeconds` fail without
   * one). Resolves false when the task already ended (nobody waits on the token any more).
   */
  heartbeat(token: string): Promise<boolean>;
}

export type TaskOutcome =
  | { ok: true; output: Record<string, unknown> }
  | { ok: false; error: string; cause: string };
