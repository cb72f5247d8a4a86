import { failRun, runFailureMessage } from '../core/runs.js';

/** Catch target of `testRun`: end the run `failed` with the cause, unless it already ended. */
export async function handler(input: {
  runId: string;
  prepared?: { attempt?: string };
  failure?: { Error?: string; Cause?: string };
}): Promise<{ runId: string }> {
  await failRun(input.runId, runFailureMessage(input.failure), { attempt: input.prepared?.attempt });
  return { runId: input.runId };
}
