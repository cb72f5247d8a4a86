import { executeRun } from '../core/run-executor.js';
import { RunNotOwned, type RunTarget } from '../core/runs.js';
import { browser } from '../ports/registry/browser.js';
import { mediaWriter } from '../ports/registry/media-writer.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { config } from '../shared/config.js';
import { Superseded } from '../shared/step-errors.js';

/**
 * The browser state of `testRun`: drive the browser through the run's steps and end the run passed or
 * failed. A run that ended meanwhile (a restart failed it) is `Superseded`: nothing more is written.
 */
export async function handler(input: {
  runId: string;
  prepared: { attempt: string; target: RunTarget };
}): Promise<{ status: 'passed' | 'failed' }> {
  const c = config();
  try {
    const status = await executeRun(
      {
        browser: browser(),
        media: mediaWriter(),
        secrets: secretStore(),
        stepTimeoutSeconds: c.runs.stepTimeoutSeconds,
        runTimeoutSeconds: c.runs.runTimeoutSeconds,
      },
      { runId: input.runId, attempt: input.prepared.attempt, target: input.prepared.target },
    );
    return { status };
  } catch (err) {
    if (err instanceof RunNotOwned) throw new Superseded(err.message);
    throw err;
  }
}
