import { type PreparedRun, prepareRun } from '../core/runs/index.js';

/**
 * First state of `testRun`: resolve the run's target and mark it `running`, or end it `failed` saying
 * which part of the target is missing (`ready: false` then ends the execution). `execution` is the
 * execution's name (the state's Parameters pass `$$.Execution.Name`): a retry of this task whose first
 * write landed finds the attempt it recorded and carries on with it.
 */
export async function handler(input: { runId: string; execution?: string }): Promise<PreparedRun> {
  return prepareRun(input.runId, input.execution ? { execution: input.execution } : {});
}
