import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { accessKey } from '../../functions/core/applications/index.js';
import { recordAsleep } from '../../functions/core/environments/index.js';
import { executionsSettled } from '../../functions/core/runs/index.js';
import { LocalArtifacts } from '../../functions/ports/artifacts/local-files.js';
import { LocalChromium } from '../../functions/ports/browser/local-chromium.js';
import { LocalBus } from '../../functions/ports/events/local-bus.js';
import { LocalMediaStore } from '../../functions/ports/media/local-files.js';
import { LocalOutboxPrStatus } from '../../functions/ports/pr-status/local-outbox.js';
import { provideLocalAdapters } from '../../functions/ports/registry.js';
import {
  describeLimits,
  limitsFromEnv,
  type SandboxLimits,
} from '../../functions/ports/runtime/local/limits.js';
import { networkIsolationUsable } from '../../functions/ports/runtime/local/network.js';
import { installedMajors } from '../../functions/ports/runtime/local/postgres.js';
import { ProcessRuntime } from '../../functions/ports/runtime/local/process.js';
import { bubblewrapUsable, type Isolation } from '../../functions/ports/runtime/local/sandbox.js';
import { serviceEnginesMissing } from '../../functions/ports/runtime/local/services.js';
import { LocalSecretStore } from '../../functions/ports/secret-store/local-files.js';
import { NoWebhookDeliveries } from '../../functions/ports/source-host/local-deliveries.js';
import { GitSourceHost } from '../../functions/ports/source-host/local-git.js';
import { LocalWebhookSecret } from '../../functions/ports/webhook-secret/local-file.js';
import { LocalWorkflows } from '../../functions/ports/workflows/local-asl.js';
import { config } from '../../functions/shared/config.js';
import { sha256Hex } from '../../functions/shared/crypto.js';
import { aslValidationCache } from './asl-cache.js';

export interface LocalAdapterHandles {
  workflows: LocalWorkflows;
  /** The in-process event bus: the service-bus rules of the event manifest (tests wait on `idle()`). */
  bus: LocalBus;
  /** Created on first use (the CLI never runs apps). */
  runtime(): ProcessRuntime;
  stop(): Promise<void>;
}

/** Where apps' working copies go for a data dir unless PREVIEW_WORK_DIR says: outside this project. */
export const defaultWorkDir = (dataDir: string): string =>
  join(tmpdir(), `preview-work-${sha256Hex(resolve(dataDir)).slice(0, 12)}`);

/**
 * How the local runtime confines builds and apps, from `PREVIEW_ISOLATION`: `auto` (the default) uses
 * bubblewrap where it works here and runs plain processes otherwise; `bwrap` insists on it (throws when
 * it is not usable, so a server meant to be multi-tenant never starts without it); `none` turns it off.
 */
export function decideIsolation(setting = process.env.PREVIEW_ISOLATION): Isolation {
  const value = (setting ?? '').trim() || 'auto';
  if (value === 'none') return 'none';
  if (value === 'auto') return bubblewrapUsable() ? 'bwrap' : 'none';
  if (value === 'bwrap') {
    if (bubblewrapUsable()) return 'bwrap';
    throw new Error(
      'PREVIEW_ISOLATION=bwrap, but bubblewrap is not usable here (`bwrap` is missing, or this kernel or ' +
        'its policy forbids the namespaces it needs); install it (apt-get install bubblewrap) or set ' +
        'PREVIEW_ISOLATION=auto or none',
    );
  }
  throw new Error(`PREVIEW_ISOLATION must be auto, bwrap or none (got ${JSON.stringify(value)})`);
}

/**
 * The lines for the operator: whether builds and apps are isolated, and what that means; under
 * bubblewrap, each sandbox's resource limits and those this machine cannot enforce.
 */
export function describeIsolation(
  isolation: Isolation,
  limits?: SandboxLimits,
  network?: 'namespace' | 'shared',
): string {
  return isolation === 'bwrap'
    ? 'isolation: bubblewrap (each build and app in its own PID namespace, sees only its working copy)' +
        (network ? `\n  ${describeNetwork(network)}` : '') +
        (limits ? `\n  ${describeLimits(limits)}` : '')
    : 'isolation: none (builds and apps run as this user and can read each other and the data dir: ' +
        'local mode is single-tenant; for isolation install bubblewrap (apt-get install bubblewrap) ' +
        'and leave PREVIEW_ISOLATION unset or set it to bwrap)';
}

/**
 * The line about preview.yaml `services:`: which of Debian's database servers are here (a deploy that
 * declares a missing one fails saying so).
 */
export function describeServices(): string {
  const missing = serviceEnginesMissing();
  const majors = installedMajors();
  if (missing.length === 0)
    return `services: postgres ${majors.join(', ')} and redis-server (preview.yaml services:)`;
  return (
    `services: ${missing.join(' and ')} missing: previews that declare such a service fail to deploy ` +
    `(apt-get install -y ${missing.join(' ')})`
  );
}

/** The line about the network of builds and apps (under bubblewrap). */
function describeNetwork(network: 'namespace' | 'shared'): string {
  return network === 'namespace'
    ? "network: a namespace per environment (pasta): its apps reach each other, not other environments' " +
        "or this machine's listeners; the host reaches each app's port on 127.0.0.1"
    : 'network: shared with this machine (a namespace per environment needs root and pasta: apt-get ' +
        "install passt): an app can reach other environments' apps and this machine's listeners on 127.0.0.1";
}

/** Install the local implementation of every port (configuration decides; handlers are unchanged). */
export function installLocalAdapters(repoRoot: string): LocalAdapterHandles {
  const c = config();
  const workflows = new LocalWorkflows(repoRoot, aslValidationCache(repoRoot));
  const sourceHost = new GitSourceHost(c.gitRoot!);
  const bus = new LocalBus({ repoRoot, dataDir: c.dataDir! });
  const prStatus = new LocalOutboxPrStatus(c.dataDir!);
  // Test runs: Debian's chromium driven by playwright-core, ffmpeg for the videos (PREVIEW_BROWSER_PATH,
  // PREVIEW_FFMPEG_PATH override them), else the packaged ones (ports/browser/local-tools.ts); warm
  // browsers, PREVIEW_RUN_CONCURRENCY runs at once.
  const browser = new LocalChromium({
    browserPath: c.runs.browserPath,
    ffmpegPath: c.runs.ffmpegPath,
    concurrency: c.runs.concurrency,
  });
  let runtime: ProcessRuntime | undefined;
  const getRuntime = () =>
    (runtime ??= new ProcessRuntime({
      dataDir: c.dataDir!,
      workDir: c.workDir ?? defaultWorkDir(c.dataDir!),
      sourceHost,
      complete: (token, outcome) => workflows.completeTask(token, outcome),
      heartbeat: (token) => workflows.heartbeat(token),
      readyTimeoutMs: c.readyTimeoutSeconds * 1000,
      appPorts: c.appPorts,
      isolation: decideIsolation(),
      limits: limitsFromEnv(),
      network:
        decideIsolation() === 'bwrap' && networkIsolationUsable(join(c.dataDir!, 'runtime', 'netns'))
          ? 'namespace'
          : 'shared',
      // Front doors: protected previews' links and cookies, and the phase `asleep`.
      accessKey: (applicationId) => accessKey(new LocalSecretStore(c.dataDir!), applicationId),
      asleep: (target, asleepAt) => recordAsleep(target, asleepAt),
    }));
  provideLocalAdapters({
    secrets: () => new LocalSecretStore(c.dataDir!),
    sourceHost: () => sourceHost,
    workflows: () => workflows,
    runtime: getRuntime,
    artifacts: () => new LocalArtifacts(c.dataDir!),
    eventBus: () => bus,
    prStatus: () => prStatus,
    webhookSecret: () => new LocalWebhookSecret(c.dataDir!, c.events.localWebhookSecret),
    // No GitHub App locally: nothing to redeliver (the local server does not run that schedule either).
    webhookDeliveries: () => new NoWebhookDeliveries(),
    browser: () => browser,
    media: () => new LocalMediaStore(c.dataDir!),
  });
  return {
    workflows,
    bus,
    runtime: getRuntime,
    stop: async () => {
      // Event deliveries first (they start executions), then executions (so no step starts anything
      // more), then the apps and builds.
      await bus.stop();
      // Browsers of runs in progress close first, so their executions end instead of waiting on them.
      await browser.stop();
      await executionsSettled();
      await workflows.stop();
      await runtime?.stop();
    },
  };
}
