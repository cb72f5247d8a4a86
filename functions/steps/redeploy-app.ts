import { DeployFailed, loadCurrent, type StepInput } from '../core/pipeline.js';

/** App redeploy (rebuild | restart) of one app: the runtime boundary, as in build-images. */
export async function handler(input: StepInput): Promise<StepInput> {
  await loadCurrent(input);
  throw new DeployFailed(`cannot ${input.mode ?? 'rebuild'} app ${input.app}: no runtime is configured yet`);
}
