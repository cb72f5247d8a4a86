import {
  failureMessage,
  reportStatus,
  type StepInput,
  Superseded,
  stopFailedApps,
  transition,
} from '../core/environments/index.js';
import { syncGate } from '../core/gate/index.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { appTeardown } from '../ports/registry/runtime/app-teardown.js';

/**
 * Catch target of every state machine: record `failed` with the cause, unless a newer request owns it,
 * then stop every app the environment still runs, recording which and why (`stoppedApps`). The phase
 * stays: it says where the failure happened (`building-images`, `waiting-ready` …).
 */
export async function handler(input: StepInput): Promise<StepInput> {
  try {
    await transition(input, { status: 'failed', error: failureMessage(input.failure).slice(0, 1000) });
    await stopFailedApps({ runtime: appTeardown() }, input);
  } catch (err) {
    if (!(err instanceof Superseded)) throw err;
  }
  // Reports only while this generation is current (not after a Superseded).
  await reportStatus({ prStatus: prStatus() }, input);
  // A failed preview completes its head's check run `failure` (a superseded one: `cancelled`).
  await syncGate({ prStatus: prStatus() }, input);
  return input;
}
