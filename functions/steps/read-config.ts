import {
  buildInputs,
  DeployFailed,
  loadCurrent,
  PREVIEW_CONFIG_PATH,
  type PreviewConfig,
  PreviewConfigError,
  parsePreviewConfig,
  type StepInput,
  transition,
} from '../core/environments/index.js';
import { sourceHost } from '../ports/registry/source-host.js';

/**
 * Deploy step 2 (building / reading-config): read and validate preview.yaml; record its apps, its services and
 * what each app's build reads at the commit (`buildInputs`: the git objects its build identity hashes).
 */
export async function handler(input: StepInput): Promise<StepInput> {
  const env = await loadCurrent(input);
  await transition(input, { phase: 'reading-config' });
  const sha = env.inputs!.headSha;
  const text = await sourceHost().readFile(env.repoFullName, sha, PREVIEW_CONFIG_PATH);
  if (text === undefined)
    throw new DeployFailed(
      `${PREVIEW_CONFIG_PATH} not found at the root of ${env.repoFullName}@${sha.slice(0, 12)}`,
    );
  let config: PreviewConfig;
  try {
    config = parsePreviewConfig(text);
  } catch (err) {
    const where = `${env.repoFullName}@${sha.slice(0, 12)}`;
    throw new DeployFailed(
      err instanceof PreviewConfigError ? err.describe(where) : `${(err as Error).message} (in ${where})`,
    );
  }
  const inputs = await buildInputs(sourceHost(), env.repoFullName, sha, config.apps);
  await transition(
    input,
    {
      apps: Object.keys(config.apps).sort(),
      appSpecs: config.apps,
      buildInputs: inputs,
      ...(config.factory ? { factory: config.factory } : {}),
      ...(config.services ? { serviceSpecs: config.services } : {}),
    },
    [...(config.factory ? [] : ['factory' as const]), ...(config.services ? [] : ['serviceSpecs' as const])],
  );
  return input;
}
