import { GitSourceHost } from '../../functions/adapters/local/git-source-host.js';
import { LocalSecretStore } from '../../functions/adapters/local/secret-store.js';
import { LocalWorkflows } from '../../functions/adapters/local/workflows.js';
import { provideLocalAdapters } from '../../functions/shared/adapters.js';
import { config } from '../../functions/shared/config.js';

export interface LocalAdapterHandles {
  workflows: LocalWorkflows;
  stop(): Promise<void>;
}

/** Install the local implementation of every port (configuration decides; handlers are unchanged). */
export function installLocalAdapters(repoRoot: string): LocalAdapterHandles {
  const c = config();
  const workflows = new LocalWorkflows(repoRoot);
  provideLocalAdapters({
    secrets: () => new LocalSecretStore(c.dataDir!),
    sourceHost: () => new GitSourceHost(c.gitRoot!),
    workflows: () => workflows,
  });
  return { workflows, stop: () => workflows.stop() };
}
