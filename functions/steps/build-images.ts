import { DeployFailed, loadCurrent, type StepInput, transition } from '../core/pipeline.js';

/**
 * Deploy step 3 (building / building-images): the runtime boundary. Building and running apps needs a
 * runtime adapter (local processes, or images on EKS), which the deploy-pipeline issue adds; until then
 * the step says so and the environment ends `failed` with that reason.
 */
export async function handler(input: StepInput): Promise<StepInput> {
  await loadCurrent(input);
  await transition(input, { phase: 'building-images' });
  throw new DeployFailed('no runtime is configured to build and run apps yet');
}
