import { type PreparedRun, prepareRun } from '../core/runs.js';

/**
 * First state of `testRun`: resolve the run's target and mark it `running`, or end it `failed` saying
 * which part of the target is missing (`ready: false` then ends the execution).
 */
export async function handler(input: { runId: string }): Promise<PreparedRun> {
  return prepareRun(input.runId);
}
