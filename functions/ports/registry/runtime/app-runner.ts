import { config } from '../../../shared/config.js';
import { cloudAppRunner } from '../../runtime/cloud.js';
import { EksApps } from '../../runtime/eks/apps.js';
import { connectionOptions, EksConnection } from '../../runtime/eks/connection.js';
import { EksRolloutWatch, type EksWatchOptions } from '../../runtime/eks/rollout-watch.js';
import { serviceStatuses } from '../../runtime/eks/services/setup.js';
import type { AppRunner } from '../../runtime/port.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { adapter, once } from '../adapters.js';
import { lambdaClient } from '../aws-clients.js';
import { workflows } from '../workflows.js';

/**
 * The `AppRunner` role, for DeployApps. AWS: `EksApps` and the start of the rollout watch over one
 * connection (it completes no task: the watcher does; no CodeBuild, ECR, CloudWatch Logs or Step
 * Functions client in the bundle); without a cluster, deploys fail saying so. Local: the one local
 * runtime. The cluster's bundles need @kubernetes/client-node, which the Kubernetes layer provides
 * (lib/cdk/bundling.ts).
 */
export const appRunner = /* @__PURE__ */ adapter<'runtime', AppRunner>('runtime', () => {
  if (!config().eks.clusterName) return cloudAppRunner();
  const connection = new EksConnection(connectionOptions());
  const apps = new EksApps(connection);
  const watch = new EksRolloutWatch(connection, {
    watcherFunction: config().eks.watcherFunction,
    lambda: lambdaClient(),
  });
  return cloudAppRunner({
    deploy: (...args) => apps.deploy(...args),
    serviceStates: (target) => serviceStatuses(connection, target),
    awaitReady: (...args) => watch.awaitReady(...args),
  });
});

/**
 * The rollout watch on the EKS cluster previews run on (AWS mode), what the rollout watcher Lambda
 * drives: it completes the deploy's task, and invokes itself by its own name to go on watching. The
 * cluster's settings (EKS_CLUSTER_NAME, EKS_INGRESS_*, …) are set by the stack.
 */
export const rolloutWatcher = /* @__PURE__ */ once(
  () => new EksRolloutWatch(new EksConnection(connectionOptions()), watcherDeps()),
);

/**
 * What the watch completes tasks with, its own name for invoking itself and the Lambda client it does
 * that with (whole.ts gives the same to the whole runtime's cluster).
 */
export function watcherDeps(): EksWatchOptions {
  return {
    watcherFunction: config().eks.watcherFunction ?? process.env.AWS_LAMBDA_FUNCTION_NAME,
    lambda: lambdaClient(),
    complete: (token: string, outcome: TaskOutcome) => workflows().completeTask(token, outcome),
    // A task nobody waits on any more (it timed out, its execution ended): the watcher stops.
    heartbeat: async (token: string) =>
      (await workflows().heartbeat(token)) ? undefined : ('gone' as const),
  };
}
