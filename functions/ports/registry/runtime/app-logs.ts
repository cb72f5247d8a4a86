import { config } from '../../../shared/config.js';
import { cloudAppLogs } from '../../runtime/cloud.js';
import { BuildLogs } from '../../runtime/codebuild/build-logs.js';
import { connectionOptions, EksConnection } from '../../runtime/eks/connection.js';
import { EksLogs } from '../../runtime/eks/logs.js';
import type { AppLogs } from '../../runtime/port.js';
import { adapter, once } from '../adapters.js';
import { cloudWatchLogsClient } from '../aws-clients.js';

/** The image builds' logs alone (CloudWatch Logs), once per container. */
export const buildLogs = /* @__PURE__ */ once(() => new BuildLogs(cloudWatchLogsClient()));

/**
 * The `AppLogs` role, for the app-logs route. AWS: pods' logs from the cluster (`EksLogs` over its own
 * connection: no deploy, fences, rollout watch or Lambda client), none without a cluster; build logs from
 * CloudWatch (`BuildLogs`: not CodeBuild's or ECR's client). Local: the one local runtime.
 */
export const appLogReader = /* @__PURE__ */ adapter<'runtime', AppLogs>('runtime', () =>
  cloudAppLogs({
    builds: buildLogs(),
    pods: config().eks.clusterName ? new EksLogs(new EksConnection(connectionOptions())) : undefined,
  }),
);
