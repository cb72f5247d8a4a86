import {
  forgetServiceCredentials,
  loadCurrent,
  reportStatus,
  runtimeTarget,
  type StepInput,
  transition,
} from '../core/environments/index.js';
import { syncGate } from '../core/gate/index.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { appTeardown } from '../ports/registry/runtime/app-teardown.js';
import { secretStore } from '../ports/registry/secret-store.js';

/**
 * Teardown: stop and remove everything the runtime runs for the environment (which also refuses any
 * later call of an older generation), then forget its services' passwords and record `torn_down` with no URLs. An environment whose preview
 * config was never read (it failed or was torn down before that) never reached the runtime, so there is
 * nothing there to remove: it ends `torn_down` without calling it.
 */
export async function handler(input: StepInput): Promise<StepInput> {
  const env = await loadCurrent(input);
  if (env.apps !== undefined) await appTeardown().teardown(runtimeTarget(env, input));
  // The runtime dropped its services with all they stored: their passwords go too.
  if (env.serviceSpecs) await forgetServiceCredentials({ secrets: secretStore() }, env);
  await transition(input, { status: 'torn_down', urls: {} }, ['phase', 'error', 'services']);
  await reportStatus({ prStatus: prStatus() }, input);
  // A story the teardown ends before its runs did completes `cancelled`.
  await syncGate({ prStatus: prStatus() }, input);
  return input;
}
