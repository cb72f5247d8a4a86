import { config } from './config.js';
import { ConfigError } from './errors.js';
import type { Runtime, SecretStore, SourceHost, Workflows } from './ports.js';

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

/**
 * Local mode's adapters are installed by the process that hosts the handlers (the local server, the CLI,
 * the test harness) before the first request. Lambda bundles never import local adapter code.
 */
export function provideLocalAdapters(factories: Factories): void {
  Object.assign(localFactories, factories);
}

/**
 * A memoized getter for a port: the cloud factory in `aws` mode, the installed local factory in `local`
 * mode. Chosen by configuration only; the handler's code path is the same in both.
 */
export function adapter<K extends PortName>(port: K, cloud: () => Adapters[K]): () => Adapters[K] {
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
