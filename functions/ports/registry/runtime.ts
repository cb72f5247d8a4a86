import { config } from '../../shared/config.js';
import { CloudCluster, CloudRuntime } from '../runtime/cloud.js';
import { type EksCluster, eksClusterOf } from '../runtime/eks/cluster.js';
import { EksClusterCore, eksClusterOptions } from '../runtime/eks/core.js';
import { describeCluster } from '../runtime/eks/describe.js';
import { EksClusterLogs } from '../runtime/eks/logs.js';
import type { Runtime } from '../runtime/port.js';
import type { TaskOutcome } from '../workflows/port.js';
import { adapter, once } from './adapters.js';
import { eksClient, lambdaClient } from './aws-clients.js';
import { buildLogs, codeBuildImages } from './image-builds.js';
import { workflows } from './workflows.js';

/**
 * The whole runtime (AWS: images on CodeBuild, apps on the EKS cluster when EKS_CLUSTER_NAME is set), for
 * the local host and the CLI. Lambda handlers take the narrower getters below, each building only the
 * clients its calls use: `clusterRuntime` (DeployApps), `teardownRuntime` (TearDown), `logsRuntime` (the
 * app-logs route),
 * `rolloutWatcher` (the watcher), and `buildRuntime`/`imageBuilds` of image-builds.ts (the image builds).
 * The cluster's bundles need @kubernetes/client-node, which the Kubernetes layer provides
 * (lib/cdk/bundling.ts).
 */
export const runtime = /* @__PURE__ */ adapter('runtime', () => {
  const c = config();
  const cluster = c.eks.clusterName
    ? eksClusterOf({
        ...watcherDeps(),
        // Outside the stack's functions (the CLI) the cluster's API may not be configured: look it up.
        api: describeCluster(c.eks.clusterName, c.region, eksClient()),
      })
    : undefined;
  return new CloudRuntime(codeBuildImages(), cluster);
});

/**
 * The cluster calls of the runtime (deploy, awaitReady, teardown): AWS, the EKS cluster without the
 * image builds nor the watcher's task callbacks (no CodeBuild, ECR or Step Functions client in the
 * bundle); without a cluster, deploys fail saying so and a teardown has nothing to remove. Local: the
 * one local runtime.
 */
export const clusterRuntime = /* @__PURE__ */ adapter<
  'runtime',
  Pick<Runtime, 'deploy' | 'awaitReady' | 'teardown'>
>('runtime', () => new CloudCluster(clusterCalls()));

/**
 * The runtime as the TearDown step uses it: `teardown` only. AWS: the cluster adapter's core
 * (`EksClusterCore`: the connection and the fenced teardown, not the deploy, the watch or the Lambda
 * invoker), nothing to remove without a cluster; local: the one local runtime.
 */
export const teardownRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'teardown'>>(
  'runtime',
  () => {
    const c = config();
    const cluster = c.eks.clusterName ? new EksClusterCore(eksClusterOptions({})) : undefined;
    return { teardown: async (target) => cluster?.teardown(target) };
  },
);

/**
 * The runtime as MarkFailed uses it: `stopApps` only (a failed environment keeps nothing running). AWS:
 * the cluster adapter's core (list and delete the environment's Deployments), nothing to stop without a
 * cluster; local: the one local runtime.
 */
export const stopRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'stopApps'>>('runtime', () => {
  const cluster = config().eks.clusterName ? new EksClusterCore(eksClusterOptions({})) : undefined;
  return { stopApps: async (target, reason) => (cluster ? cluster.stopApps(target, reason) : {}) };
});

/**
 * The runtime as the expiry sweep uses it: `pruneFences` only. AWS: the cluster adapter's core (list and
 * delete the teardown fences, read namespaces), nothing to remove without a cluster; local: the one local
 * runtime.
 */
export const fenceRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'pruneFences'>>(
  'runtime',
  () => {
    const cluster = config().eks.clusterName ? new EksClusterCore(eksClusterOptions({})) : undefined;
    return { pruneFences: async (before) => cluster?.pruneFences(before) ?? { removed: 0 } };
  },
);

/**
 * The runtime as the app-logs route reads it: pods' logs from the cluster (`EksClusterLogs`: the cluster
 * adapter without the deploy, the watch or the Lambda invoker), build logs from CloudWatch (`BuildLogs`).
 */
export const logsRuntime = /* @__PURE__ */ adapter<'runtime', Pick<Runtime, 'logs'>>('runtime', () => {
  const cluster = config().eks.clusterName ? new EksClusterLogs(eksClusterOptions({})) : undefined;
  return {
    logs: async (target, app, query) =>
      query.source === 'build' ? buildLogs().logs(target, app, query) : cluster?.logs(target, app, query),
  } satisfies Pick<Runtime, 'logs'>;
});

/** The EKS cluster for DeployApps (it completes no task: the watcher does), if one is configured. */
const clusterCalls = /* @__PURE__ */ once((): EksCluster | undefined =>
  config().eks.clusterName
    ? eksClusterOf({ watcherFunction: config().eks.watcherFunction, lambda: lambdaClient() })
    : undefined,
);

/**
 * The EKS cluster previews run on (AWS mode), also what the rollout watcher Lambda drives. Its settings
 * (EKS_CLUSTER_NAME, EKS_INGRESS_*, …) are set by the stack; the watcher invokes itself by its own name.
 */
export const rolloutWatcher = /* @__PURE__ */ once((): EksCluster => eksClusterOf(watcherDeps()));

/**
 * What the watching cluster adapter completes tasks with, its own name for invoking itself and the Lambda
 * client it does that with.
 */
function watcherDeps() {
  return {
    watcherFunction: config().eks.watcherFunction ?? process.env.AWS_LAMBDA_FUNCTION_NAME,
    lambda: lambdaClient(),
    complete: (token: string, outcome: TaskOutcome) => workflows().completeTask(token, outcome),
    // A task nobody waits on any more (it timed out, its execution ended): the watcher stops.
    heartbeat: async (token: string) =>
      (await workflows().heartbeat(token)) ? undefined : ('gone' as const),
  };
}
