import { config } from '../../shared/config.js';
import { CloudRuntime } from '../runtime/cloud.js';
import { type EksCluster, eksClusterFromEnv } from '../runtime/eks.js';
import { adapter, once } from './adapters.js';
import { codeBuildImages } from './image-builds.js';
import { workflows } from './workflows.js';

/**
 * The whole runtime (AWS: images on CodeBuild, apps on the EKS cluster when EKS_CLUSTER_NAME is set). Its
 * bundles need @kubernetes/client-node, which the Kubernetes layer provides (lib/cdk/bundling.ts); a
 * handler that only builds imports `buildRuntime` from image-builds.ts instead.
 */
export const runtime = /* @__PURE__ */ adapter(
  'runtime',
  () => new CloudRuntime(codeBuildImages(), config().eks.clusterName ? rolloutWatcher() : undefined),
);

/**
 * The EKS cluster previews run on (AWS mode), also what the rollout watcher Lambda drives. Its settings
 * (EKS_CLUSTER_NAME, EKS_INGRESS_*, …) are set by the stack; the watcher invokes itself by its own name.
 */
export const rolloutWatcher = /* @__PURE__ */ once(
  (): EksCluster =>
    eksClusterFromEnv({
      watcherFunction: config().eks.watcherFunction ?? process.env.AWS_LAMBDA_FUNCTION_NAME,
      complete: (token, outcome) => workflows().completeTask(token, outcome),
      // A task nobody waits on any more (it timed out, its execution ended): the watcher stops.
      heartbeat: async (token) => ((await workflows().heartbeat(token)) ? undefined : 'gone'),
    }),
);
