/**
 * The registry's mechanism: which adapter serves which port, chosen by configuration (`PREVIEW_MODE`) and
 * nothing else, so a handler's code path is the same in both modes. The getters live one module per port
 * beside this one (`secret-store.ts`, `workflows.ts`, …), so a Lambda bundle carries only the adapters,
 * SDK clients and libraries of the ports its handler imports; `../registry.ts` re-exports them all for
 * the local host and tests.
 *
 * - `aws`: each getter builds its cloud adapter on first use, once per container (one AWS client per service,
 *   aws-clients.ts, shared by the adapters and reused across invocations).
 * - `local`: the process that hosts the handlers (the local server, the CLI, the test harness) installs the
 *   local adapters with `provideLocalAdapters` before the first request (lib/local/adapters.ts); each port
 *   has one local instance, whichever getters serve it. Lambda bundles never import local adapter code.
 */
import { config } from '../../shared/config.js';
import { ConfigError } from '../../shared/errors.js';
import type { Artifacts } from '../artifacts/port.js';
import type { Browser } from '../browser/port.js';
import type { EventBus } from '../events/port.js';
import type { MediaStore } from '../media/port.js';
import type { PrStatus } from '../pr-status/port.js';
import type { Runtime } from '../runtime/port.js';
import type { SecretStore } from '../secret-store/port.js';
import type { SourceHost, WebhookDeliveries } from '../source-host/port.js';
import type { WebhookSecret } from '../webhook-secret/port.js';
import type { Workflows } from '../workflows/port.js';

/** Every port, by name. */
export interface Adapters {
  secrets: SecretStore;
  workflows: Workflows;
  sourceHost: SourceHost;
  runtime: Runtime;
  artifacts: Artifacts;
  eventBus: EventBus;
  prStatus: PrStatus;
  webhookSecret: WebhookSecret;
  webhookDeliveries: WebhookDeliveries;
  browser: Browser;
  media: MediaStore;
}
export type PortName = keyof Adapters;
type Factories = { [K in PortName]?: () => Adapters[K] };

const localFactories: Factories = {};
const localInstances: Partial<Adapters> = {};

/** Install local adapters (local mode only; see the file comment). */
export function provideLocalAdapters(factories: Factories): void {
  Object.assign(localFactories, factories);
}

/**
 * A memoized getter for a port: the cloud factory in `aws` mode (once per getter), the installed local
 * adapter in `local` mode (once per port). `T` narrows what the getter promises when a handler needs only
 * part of a port (the runtime's roles: `imageBuilder`, registry/runtime/).
 */
export function adapter<K extends PortName, T = Adapters[K]>(port: K, cloud: () => NoInfer<T>): () => T {
  let instance: T | undefined;
  return () => {
    if (instance) return instance;
    if (config().mode === 'local') {
      if (!localInstances[port]) {
        const factory = localFactories[port] as (() => Adapters[K]) | undefined;
        if (!factory) throw new ConfigError(`no local adapter installed for port "${port}"`);
        localInstances[port] = factory();
      }
      instance = localInstances[port] as T;
    } else {
      instance = cloud();
    }
    return instance;
  };
}

/** A setting the cloud adapters cannot do without (CDK sets them all): missing is a configuration error. */
export function required<T>(value: T | undefined, name: string): T {
  if (value === undefined)
    throw new ConfigError(`${name} is not set: the stack sets it on every function that needs it`);
  return value;
}

/** A value built once per container on first use (cloud-side helpers shared by several getters). */
export function once<T>(build: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= build());
}
