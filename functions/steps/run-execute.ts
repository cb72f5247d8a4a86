import type { Context } from 'aws-lambda';
import { gateLinks, syncGateOfRun } from '../core/gate/index.js';
import { executeRun, RunNotOwned, type RunTarget } from '../core/runs/index.js';
import { browser } from '../ports/registry/browser.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { mediaWriter } from '../ports/registry/media-writer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { frontDoor } from '../ports/registry/runtime/front-door.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { config } from '../shared/config.js';
import { Superseded } from '../shared/step-errors.js';

/**
 * The browser state of `testRun`: drive the browser through the run's steps and end the run passed or
 * failed. A run that ended meanwhile (a restart failed it) is `Superseded`: nothing more is written.
 * In AWS the steps stop early enough that the video, its upload and `down` fit in the Lambda's remaining
 * time (core/run-deadline.ts); a retry of this task by Step Functions finds the first invocation's claim
 * and never runs the steps again (core/run-claims.ts).
 */
export async function handler(
  input: {
    runId: string;
    prepared: { attempt: string; target: RunTarget };
  },
  context?: Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId'>,
): Promise<{ status: 'passed' | 'failed' }> {
  const c = config();
  try {
    const status = await executeRun(
      {
        browser: browser(),
        media: mediaWriter(),
        secrets: secretStore(),
        stepTimeoutSeconds: c.runs.stepTimeoutSeconds,
        runTimeoutSeconds: c.runs.runTimeoutSeconds,
        wakeTimeoutSeconds: c.runs.wakeTimeoutSeconds,
        // Locally the run's own limit applies alone (the local engine's context is no Lambda's).
        ...(c.mode === 'aws' && context ? { remainingMs: () => context.getRemainingTimeInMillis() } : {}),
        ...(context?.awsRequestId ? { invocationId: context.awsRequestId } : {}),
        // Locally a sleeping preview is woken by the front door; in AWS the executor's asks wake it (wake.ts).
        ...(c.mode === 'local'
          ? {
              wake: (ref: { orgId: string; envKey: string }) => frontDoor().wake(ref),
              serviceUrls: async (ref: { orgId: string; envKey: string }) => frontDoor().serviceUrls?.(ref),
            }
          : {}),
      },
      { runId: input.runId, attempt: input.prepared.attempt, target: input.prepared.target },
    );
    // The merge gate this run belongs to: completed once it was the last of its story.
    await syncGateOfRun({ prStatus: prStatus(), links: gateLinks(linkSigner) }, input.runId);
    return { status };
  } catch (err) {
    if (err instanceof RunNotOwned) throw new Superseded(err.message);
    throw err;
  }
}
