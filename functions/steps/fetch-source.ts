import {
  DeployFailed,
  loadCurrent,
  type StepInput,
  stageSource,
  transition,
} from '../core/environments/index.js';
import { artifacts } from '../ports/registry/artifacts.js';
import { sourceHost } from '../ports/registry/source-host.js';

/**
 * Deploy step 1 (building / fetching-source): the head commit must exist at the source host; its tree is
 * staged as an archive for the image builds (once per repository and commit).
 */
export async function handler(input: StepInput): Promise<StepInput> {
  const env = await loadCurrent(input);
  await transition(input, { status: 'building', phase: 'fetching-source' });
  if (!env.inputs) throw new DeployFailed('environment has no stored deploy inputs');
  const { headSha } = env.inputs;
  if (!(await sourceHost().installation(env.repoFullName))) {
    throw new DeployFailed(`repository ${env.repoFullName} not found (or not accessible to the source host)`);
  }
  if (!(await sourceHost().hasCommit(env.repoFullName, headSha))) {
    throw new DeployFailed(`commit ${headSha} not found in ${env.repoFullName}`);
  }
  await stageSource({ sourceHost: sourceHost(), artifacts: artifacts() }, env, headSha);
  return input;
}
