import { loadCurrent, type StepInput, transition } from '../core/pipeline.js';

/**
 * Teardown: remove what the runtime runs for the environment, then record `torn_down` with no URLs.
 * Nothing runs before the runtime adapter exists, so there is nothing to remove yet.
 */
export async function handler(input: StepInput): Promise<StepInput> {
  await loadCurrent(input);
  await transition(input, { status: 'torn_down', urls: {} }, ['phase', 'error']);
  return input;
}
