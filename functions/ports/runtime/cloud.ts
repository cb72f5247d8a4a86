import { DeployFailed } from '../../shared/step-errors.js';
import type { CodeBuildImages } from './codebuild/images.js';
import type * as port from './port.js';

/** The cluster half of the cloud runtime: run built images (EKS). */
export type Cluster = Pick<
  port.Runtime,
  'deploy' | 'awaitReady' | 'stopApps' | 'teardown' | 'pruneFences' | 'logs'
>;

/** What reads a build's log (the image half: codebuild/build-logs.ts `BuildLogs`, or `CodeBuildImages` itself). */
export type BuildLogReader = Pick<port.Runtime, 'logs'>;

/** Why an environment cannot run: this deployment has no cluster configured. */
export function clusterMissing(): DeployFailed {
  return new DeployFailed(
    'images are built, but no EKS cluster is configured to run them (the stack prop eksClusterName, EKS_CLUSTER_NAME)',
  );
}

/**
 * The cloud runtime without its image builds: the cluster calls (deploy, awaitReady, teardown, app logs)
 * and, when given, the build-log reader. What the cluster steps and the app-logs route get from the
 * registry (registry/runtime.ts), so their bundles carry neither CodeBuild nor ECR. Without a cluster,
 * deploys fail saying so, and a teardown has nothing to remove (nothing of the environment runs).
 */
export class CloudCluster implements Omit<port.Runtime, 'build'> {
  constructor(
    private readonly cluster?: Cluster,
    private readonly buildLogs?: BuildLogReader,
  ) {}

  async deploy(target: port.RuntimeTarget, apps: port.AppLaunch[], opts?: port.DeployOptions) {
    if (!this.cluster) throw clusterMissing();
    return this.cluster.deploy(target, apps, opts);
  }

  async awaitReady(target: port.RuntimeTarget, apps: Record<string, port.AppSpec>, token: string) {
    if (!this.cluster) throw clusterMissing();
    return this.cluster.awaitReady(target, apps, token);
  }

  /** The cluster's apps stopped (none without a cluster: nothing of the environment runs). */
  async stopApps(target: port.RuntimeTarget, reason: string): Promise<Record<string, string>> {
    return this.cluster ? this.cluster.stopApps(target, reason) : {};
  }

  async teardown(target: port.RuntimeTarget) {
    if (this.cluster) return this.cluster.teardown(target);
  }

  /** The cluster's teardown fences (none without a cluster: nothing was ever fenced there). */
  async pruneFences(before: Date) {
    return this.cluster ? this.cluster.pruneFences(before) : { removed: 0 };
  }

  /** A build's log from CloudWatch Logs (CodeBuild), an app's from its pods (none without a cluster). */
  async logs(target: port.LogTarget, app: string, query: port.LogQuery): Promise<port.LogText | undefined> {
    if (query.source === 'build') return this.buildLogs?.logs(target, app, query);
    return this.cluster?.logs(target, app, query);
  }
}

/** The cloud runtime: images built on CodeBuild, run on a cluster (`CloudCluster`). */
export class CloudRuntime extends CloudCluster implements port.Runtime {
  constructor(
    readonly images: CodeBuildImages,
    cluster?: Cluster,
  ) {
    super(cluster, images);
  }

  build(...args: Parameters<port.Runtime['build']>) {
    return this.images.build(...args);
  }
}
