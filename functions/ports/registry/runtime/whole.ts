import { config } from '../../../shared/config.js';
import { CloudRuntime } from '../../runtime/cloud.js';
import { eksClusterOf } from '../../runtime/eks/cluster.js';
import { describeCluster } from '../../runtime/eks/describe.js';
import { adapter } from '../adapters.js';
import { eksClient } from '../aws-clients.js';
import { watcherDeps } from './app-runner.js';
import { codeBuildImages } from './image-builder.js';

/**
 * The whole runtime, every role (AWS: images on CodeBuild, apps on the EKS cluster when EKS_CLUSTER_NAME
 * is set), for the local host and the CLI. Lambda handlers take the getter of the one role they call
 * (beside this file), each building only the clients its calls use: `imageBuilder` and `imageBuilds`
 * (image-builder.ts), `appRunner` and `rolloutWatcher` (app-runner.ts), `appTeardown` (app-teardown.ts),
 * `appLogReader` (app-logs.ts), `frontDoor` (front-door.ts).
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
