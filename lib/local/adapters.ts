import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { provideLocalAdapters } from '../../functions/ports/registry.js';
import { ProcessRuntime } from '../../functions/ports/runtime/local-process.js';
import { LocalSecretStore } from '../../functions/ports/secret-store/local-files.js';
import { GitSourceHost } from '../../functions/ports/source-host/local-git.js';
import { LocalWorkflows } from '../../functions/ports/workflows/local-asl.js';
import { config } from '../../functions/shared/config.js';
import { sha256Hex } from '../../functions/shared/crypto.js';

export interface LocalAdapterHandles {
  workflows: LocalWorkflows;
  /** Created on first use (the CLI never runs apps). */
  runtime(): ProcessRuntime;
  stop(): Promise<void>;
}

/** Where apps' working copies go for a data dir unless PREVIEW_WORK_DIR says: outside this project. */
export const defaultWorkDir = (dataDir: string): string =>
  join(tmpdir(), `preview-work-${sha256Hex(resolve(dataDir)).slice(0, 12)}`);

/** Install the local implementation of every port (configuration decides; handlers are unchanged). */
export function installLocalAdapters(repoRoot: string): LocalAdapterHandles {
  const c = config();
  const workflows = new LocalWorkflows(repoRoot);
  const sourceHost = new GitSourceHost(c.gitRoot!);
  let runtime: ProcessRuntime | undefined;
  const getRuntime = () =>
    (runtime ??= new ProcessRuntime({
      dataDir: c.dataDir!,
      workDir: c.workDir ?? defaultWorkDir(c.dataDir!),
      sourceHost,
      complete: (token, outcome) => workflows.completeTask(token, outcome),
      readyTimeoutMs: c.readyTimeoutSeconds * 1000,
    }));
  provideLocalAdapters({
    secrets: () => new LocalSecretStore(c.dataDir!),
    sourceHost: () => sourceHost,
    workflows: () => workflows,
    runtime: getRuntime,
  });
  return {
    workflows,
    runtime: getRuntime,
    stop: async () => {
      // Executions first (so no step starts anything more), then the apps and builds.
      await workflows.stop();
      await runtime?.stop();
    },
  };
}
