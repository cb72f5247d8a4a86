/**
 * The EKS cluster half of the cloud runtime (cloud.ts): a namespace per environment on the customer's EKS
 * cluster, each app an image in a Deployment behind a Service and an https Ingress.
 *
 * **Composed from one connection.** `EksConnection` (eks/connection.ts) reaches the cluster's API through
 * the real `@kubernetes/client-node` (eks/client.ts) at the cluster's endpoint with its CA, which the stack
 * resolved at deploy time (its `eks:DescribeCluster`, as EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA: no
 * function bundles the EKS client), with an STS-presigned bearer token (eks/auth.ts). Each part takes it:
 *
 * | Part              | File             | Role it plays                      | Handlers that take it                  |
 * |-------------------|------------------|------------------------------------|----------------------------------------|
 * | `EksApps`         | apps.ts          | `AppRunner`: deploy                | DeployApps                             |
 * | `EksFrontDoor`    | front-door.ts    | the door's objects, in a deploy    | DeployApps (through `EksApps`)         |
 * | `EksRolloutWatch` | rollout-watch.ts | `AppRunner`: awaitReady; the watch | DeployApps, the rollout watcher        |
 * | `EksTeardown`     | teardown.ts      | `AppTeardown`                      | MarkFailed, TearDown, the expiry sweep |
 * | `EksLogs`         | logs.ts          | `AppLogs`: the pods' output        | the app-logs route                     |
 *
 * with the fencing they share as functions of the connection (eks/fences.ts) and the objects as plain data
 * (eks/objects.ts, eks/front-door.ts). `EksCluster` below assembles them all over one connection; a
 * registry getter (ports/registry/runtime/) assembles only the parts its handler calls, so a bundle holds
 * no more of the adapter than that handler uses.
 *
 * **Fencing by generation.** The namespace's `preview-control-plane/generation` annotation is the
 * environment's fence: a call of an older generation changes nothing and throws `Superseded`; a newer one
 * bumps it (a compare-and-set on the namespace's resourceVersion). Every object carries the generation
 * that wrote it too, and is written with optimistic concurrency, so of two deploys racing, the older never
 * overwrites what the newer wrote. A teardown leaves a fence behind the namespace it deletes (a ConfigMap in
 * `systemNamespace`, eks/objects.ts `fenceObject`), so a late call of an older generation can't re-create
 * it either. A fence goes once nothing needs it: when a newer generation creates the namespace again (its
 * annotation fences from then on), or, its namespace gone, when the expiry sweep finds it older than any
 * call it fences can be (`pruneFences`; core/expiry.ts `FENCE_RETENTION_MS`).
 *
 * **deploy** applies, per app, its Secret, Deployment, Service and Ingress (create, or replace when what
 * was written differs: the same content is not rewritten, so an unchanged app does not roll); plus the
 * namespace's ResourceQuota and NetworkPolicy. Only the apps passed are touched; `prune` (a whole
 * environment deploy) deletes the objects of apps no longer passed.
 * - **rebuild vs restart.** Without `restart`, an app's Deployment gets the launch's `image` (a rebuild
 *   rolls that app to its new image; an app whose image, env and secret bundle are unchanged does not
 *   roll). With `restart: true`, the app's Secret is re-synced from the bundle and its Deployment is
 *   merge-patched on the pod template only (`kubectl.kubernetes.io/restartedAt`, the bundle's version and
 *   the rollout label), keeping the running image: the launch's `image` is not needed and not used (unless
 *   the app has no Deployment yet, where the full apply runs). Siblings are never touched.
 *
 * **awaitReady** starts the rollout watcher (a Lambda, `functions/watchers/rollout.ts`, invoked
 * asynchronously) and returns. The watcher (`watch`) checks every `pollMs` for up to `sliceMs` per
 * invocation, then invokes itself again, until every app is ready (the token completes with their https
 * URLs), one fails (`DeployFailed` naming the app, the reason, and its last log lines with the secret
 * values masked), a newer generation owns the environment (`Superseded`), or the deadline passes. So the
 * state machine pays two transitions per deploy however long the rollout takes.
 *
 * **teardown** writes the fence, deletes the namespace with foreground propagation and waits (bounded,
 * `teardownWaitMs`) until it is gone; still there then, it throws `TransientError` (the state machine
 * retries, and the retry waits again), so the environment becomes torn_down only once the namespace is gone.
 */
import { type Config, config } from '../../../shared/config.js';
import type {
  AppLaunch,
  AppLogs,
  AppRunner,
  AppSpec,
  AppTeardown,
  DeployOptions,
  LogQuery,
  LogTarget,
  LogText,
  RuntimeTarget,
  ServiceState,
} from '../port.js';
import { EksApps } from './apps.js';
import { connectionOptions, EksConnection, type EksConnectionOptions } from './connection.js';
import { EksLogs } from './logs.js';
import { namespaceName, publicUrl } from './objects.js';
import { EksRolloutWatch, type EksWatchOptions, type RolloutWatchEvent } from './rollout-watch.js';
import { serviceStatuses } from './services/setup.js';
import { EksTeardown } from './teardown.js';

export { type ClusterApi, type EksTiming, TIMING_DEFAULTS } from './connection.js';
export type { RolloutWatchEvent, WatchOutcome } from './rollout-watch.js';

/** Everything the whole adapter is made from: the connection's options and the watch's. */
export type EksClusterOptions = EksConnectionOptions & EksWatchOptions;

/**
 * The whole EKS adapter: every part over one connection (the table above), for the cloud runtime of the
 * local host and the CLI (registry `runtime`) and the adapter's own tests.
 */
export class EksCluster implements AppRunner, AppTeardown, AppLogs {
  private readonly connection: EksConnection;
  private readonly apps: EksApps;
  private readonly rollouts: EksRolloutWatch;
  private readonly teardowns: EksTeardown;
  private readonly pods: EksLogs;

  constructor(opts: EksClusterOptions) {
    this.connection = new EksConnection(opts);
    this.apps = new EksApps(this.connection);
    this.rollouts = new EksRolloutWatch(this.connection, opts);
    this.teardowns = new EksTeardown(this.connection);
    this.pods = new EksLogs(this.connection);
  }

  /** The namespace of an environment. */
  namespaceOf(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>): string {
    return namespaceName(target);
  }

  /** The https URL of an app. */
  urlOf(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>, app: string): string {
    return publicUrl(namespaceName(target), app, this.connection.opts.domain);
  }

  deploy(target: RuntimeTarget, launches: AppLaunch[], opts?: DeployOptions): Promise<void> {
    return this.apps.deploy(target, launches, opts);
  }

  /** The services as the cluster has them (eks/services/setup.ts `serviceStatuses`). */
  serviceStates(target: RuntimeTarget): Promise<Record<string, ServiceState['status']>> {
    return serviceStatuses(this.connection, target);
  }

  awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string): Promise<void> {
    return this.rollouts.awaitReady(target, apps, token);
  }

  /** One rollout watcher invocation (functions/watchers/rollout.ts), see `EksRolloutWatch.watch`. */
  watch(event: RolloutWatchEvent, remainingMs?: () => number) {
    return this.rollouts.watch(event, remainingMs);
  }

  stopApps(target: RuntimeTarget, reason: string): Promise<Record<string, string>> {
    return this.teardowns.stopApps(target, reason);
  }

  failedServices(target: RuntimeTarget): Promise<string[]> {
    return this.teardowns.failedServices(target);
  }

  teardown(target: RuntimeTarget): Promise<void> {
    return this.teardowns.teardown(target);
  }

  pruneFences(before: Date): Promise<{ removed: number }> {
    return this.teardowns.pruneFences(before);
  }

  logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    return this.pods.logs(target, app, query);
  }
}

/** What `eksClusterOptions` takes besides the configuration: task callbacks, the watcher, the clients. */
export type EksClusterDeps = Pick<
  EksClusterOptions,
  'complete' | 'heartbeat' | 'invokeWatcher' | 'watcherFunction' | 'api' | 'lambda'
>;

/**
 * The EKS cluster's options from the configuration (eks/connection.ts `connectionOptions`: `EKS_*`,
 * `AWS_REGION`; and `ROLLOUT_WATCHER_FUNCTION`) and `deps`: the cluster's API when the stack did not
 * resolve it, the watcher's means; `deps.watcherFunction` wins over the configured one.
 */
export function eksClusterOptions(
  deps: EksClusterDeps,
  settings: Pick<Config, 'region' | 'eks'> = config(),
): EksClusterOptions {
  return {
    ...deps,
    ...connectionOptions(settings, deps.api),
    watcherFunction: deps.watcherFunction || settings.eks.watcherFunction || undefined,
  };
}

/** The EKS cluster as configured (`eksClusterOptions`: shared/config.ts, EKS_*). */
export function eksClusterOf(
  deps: EksClusterDeps,
  settings: Pick<Config, 'region' | 'eks'> = config(),
): EksCluster {
  return new EksCluster(eksClusterOptions(deps, settings));
}
