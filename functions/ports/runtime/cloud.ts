/**
 * The cloud runtime, assembled from its parts by role (port.ts): images built on CodeBuild (`ImageBuilder`,
 * codebuild/images.ts), apps run on the EKS cluster (`AppRunner`, `AppTeardown`, and `AppLogs` for the
 * pods: eks/cluster.ts), build logs read from CloudWatch Logs (`AppLogs` for builds: codebuild/
 * build-logs.ts). No front door of its own: the cluster's engines are the door (eks/front-door.ts).
 *
 * A deployment may have no cluster configured (EKS_CLUSTER_NAME unset): images are built, deploys fail
 * saying so, and stopping or tearing down has nothing to remove (nothing of the environment runs). The
 * functions below give each role that behaviour, so the registry's getters (ports/registry/runtime/)
 * assemble the same roles from only the parts their handler calls, and `CloudRuntime` from all of them.
 */
import { DeployFailed } from '../../shared/step-errors.js';
import type { CodeBuildImages } from './codebuild/images.js';
import type * as port from './port.js';

/** Why an environment cannot run: this deployment has no cluster configured. */
export function clusterMissing(): DeployFailed {
  return new DeployFailed(
    'images are built, but no EKS cluster is configured to run them (the stack prop eksClusterName, EKS_CLUSTER_NAME)',
  );
}

/** Running apps on the cluster; without one, every deploy and readiness wait fails saying so. */
export function cloudAppRunner(cluster?: port.AppRunner): port.AppRunner {
  return {
    async deploy(target, apps, opts) {
      if (!cluster) throw clusterMissing();
      return cluster.deploy(target, apps, opts);
    },
    async serviceStates(target) {
      return (await cluster?.serviceStates?.(target)) ?? {};
    },
    async awaitReady(target, apps, token) {
      if (!cluster) throw clusterMissing();
      return cluster.awaitReady(target, apps, token);
    },
  };
}

/** Stopping and removing on the cluster; without one, nothing to stop, remove or prune. */
export function cloudAppTeardown(cluster?: port.AppTeardown): port.AppTeardown {
  return {
    stopApps: async (target, reason) => (cluster ? cluster.stopApps(target, reason) : {}),
    failedServices: async (target) => (await cluster?.failedServices?.(target)) ?? [],
    teardown: async (target) => {
      if (cluster) return cluster.teardown(target);
    },
    pruneFences: async (before) => (cluster ? cluster.pruneFences(before) : { removed: 0 }),
  };
}

/** A build's log from CloudWatch Logs (CodeBuild), an app's from its pods (none without a cluster). */
export function cloudAppLogs(readers: { builds?: port.AppLogs; pods?: port.AppLogs }): port.AppLogs {
  return {
    logs: async (target, app, query) =>
      query.source === 'build'
        ? readers.builds?.logs(target, app, query)
        : readers.pods?.logs(target, app, query),
  };
}

/** The whole cloud runtime: images on CodeBuild, apps on a cluster (when one is configured). */
export class CloudRuntime implements port.Runtime {
  private readonly runner: port.AppRunner;
  private readonly teardowns: port.AppTeardown;
  private readonly reader: port.AppLogs;

  constructor(
    readonly images: CodeBuildImages,
    cluster?: port.AppRunner & port.AppTeardown & port.AppLogs,
  ) {
    this.runner = cloudAppRunner(cluster);
    this.teardowns = cloudAppTeardown(cluster);
    this.reader = cloudAppLogs({ builds: images, pods: cluster });
  }

  build(...args: Parameters<port.ImageBuilder['build']>) {
    return this.images.build(...args);
  }
  deploy(...args: Parameters<port.AppRunner['deploy']>) {
    return this.runner.deploy(...args);
  }
  serviceStates(target: port.RuntimeTarget) {
    return this.runner.serviceStates?.(target) ?? Promise.resolve({});
  }
  awaitReady(...args: Parameters<port.AppRunner['awaitReady']>) {
    return this.runner.awaitReady(...args);
  }
  stopApps(...args: Parameters<port.AppTeardown['stopApps']>) {
    return this.teardowns.stopApps(...args);
  }
  failedServices(target: port.RuntimeTarget) {
    return this.teardowns.failedServices?.(target) ?? Promise.resolve([]);
  }
  teardown(...args: Parameters<port.AppTeardown['teardown']>) {
    return this.teardowns.teardown(...args);
  }
  pruneFences(...args: Parameters<port.AppTeardown['pruneFences']>) {
    return this.teardowns.pruneFences(...args);
  }
  logs(...args: Parameters<port.AppLogs['logs']>) {
    return this.reader.logs(...args);
  }
}
