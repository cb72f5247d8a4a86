/**
 * The registry: which adapter serves which port, chosen by configuration (`PREVIEW_MODE`) and nothing
 * else, so a handler's code path is the same in both modes.
 *
 * - `aws`: each getter builds its cloud adapter on first use, once per container (SDK clients are created
 *   with it and reused across invocations). The `@__PURE__` marks let esbuild drop the getters, and so the
 *   SDK clients, that a handler does not use.
 * - `local`: the process that hosts the handlers (the local server, the CLI, the test harness) installs the
 *   local adapters with `provideLocalAdapters` before the first request (lib/local/adapters.ts). Lambda
 *   bundles never import local adapter code: this file imports only cloud adapters and contracts.
 *
 * A new port is a folder under `ports/` (contract, adapters, contract test) plus one getter here.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { config } from '../shared/config.js';
import { ConfigError, ServiceUnavailableError } from '../shared/errors.js';
import type { Runtime } from './runtime/port.js';
import type { SecretStore } from './secret-store/port.js';
import { SecretsManagerStore } from './secret-store/secrets-manager.js';
import type { SourceHost } from './source-host/port.js';
import type { Workflows } from './workflows/port.js';
import { StepFunctionsWorkflows } from './workflows/step-functions.js';

/** Every port, by name. */
export interface Adapters {
  secrets: SecretStore;
  workflows: Workflows;
  sourceHost: SourceHost;
  runtime: Runtime;
}
export type PortName = keyof Adapters;
type Factories = { [K in PortName]?: () => Adapters[K] };

const localFactories: Factories = {};

/** Install local adapters (local mode only; see the file comment). */
export function provideLocalAdapters(factories: Factories): void {
  Object.assign(localFactories, factories);
}

/** A memoized getter for a port: the cloud factory in `aws` mode, the installed local one in `local` mode. */
function adapter<K extends PortName>(port: K, cloud: () => Adapters[K]): () => Adapters[K] {
  let instance: Adapters[K] | undefined;
  return () => {
    if (instance) return instance;
    if (config().mode === 'local') {
      const factory = localFactories[port] as (() => Adapters[K]) | undefined;
      if (!factory) throw new ConfigError(`no local adapter installed for port "${port}"`);
      instance = factory();
    } else {
      instance = cloud();
    }
    return instance;
  };
}

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
  throw new ServiceUnavailableError(
    'the GitHub source-host adapter is not built yet in AWS mode; run with PREVIEW_MODE=local',
  );
});

export const runtime = /* @__PURE__ */ adapter('runtime', () => {
  // The EKS runtime (image builds whose completion calls SendTaskSuccess, a namespace per environment,
  // Deployments with the bundle as a Secret, rollout watch) is the seam left for a later issue.
  throw new ServiceUnavailableError(
    'the EKS runtime adapter is not built yet in AWS mode; run with PREVIEW_MODE=local',
  );
});
