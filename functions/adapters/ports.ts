import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { adapter } from '../shared/adapters.js';
import { config } from '../shared/config.js';
import { ConfigError } from '../shared/errors.js';
import { SecretsManagerStore } from './aws/secrets-manager.js';
import { StepFunctionsWorkflows } from './aws/step-functions.js';

/*
 * One getter per port, created once per container on first use. In `aws` mode each builds its cloud
 * adapter (SDK clients at module scope, reused across invocations); in `local` mode it returns the adapter
 * the local host installed. The `@__PURE__` marks let esbuild drop the getters, and so the SDK clients,
 * that a handler does not use.
 */

export const secretStore = /* @__PURE__ */ adapter(
  'secrets',
  () =>
    new SecretsManagerStore(new SecretsManagerClient({ region: config().region }), config().secretNamePrefix),
);

export const workflows = /* @__PURE__ */ adapter(
  'workflows',
  () => new StepFunctionsWorkflows(new SFNClient({ region: config().region }), config().stateMachines),
);

export const sourceHost = /* @__PURE__ */ adapter('sourceHost', () => {
  // The GitHub App adapter (@octokit/app: installation lookup, ref resolution, tarball checkout) is the
  // seam left for a later issue; until then AWS mode says so instead of pretending.
  throw new ConfigError('the GitHub source-host adapter is not built yet; run with PREVIEW_MODE=local');
});

export const runtime = /* @__PURE__ */ adapter('runtime', () => {
  // The EKS runtime (image builds whose completion calls SendTaskSuccess, a namespace per environment,
  // Deployments with the bundle as a Secret, rollout watch) is the seam left for a later issue.
  throw new ConfigError('the EKS runtime adapter is not built yet; run with PREVIEW_MODE=local');
});
