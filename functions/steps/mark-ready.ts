import { loadCurrent, type StepInput, transition } from '../core/pipeline.js';

/** Last step: `ready` with every app's URL (from the readiness callback) and the SHA now deployed. */
export async function handler(input: StepInput & { ready: { urls: Record<string, string> } }) {
  const env = await loadCurrent(input);
  const { ready, ...rest } = input;
  await transition(rest, { status: 'ready', urls: ready.urls, lastDeployedSha: env.inputs!.headSha }, [
    'phase',
    'error',
  ]);
  return rest;
}
