import { type CodeBuildImages, clusterMissing } from './codebuild-images.js';
import type {
  AppLaunch,
  AppSpec,
  BuildOptions,
  DeployOptions,
  LogQuery,
  LogTarget,
  LogText,
  Runtime,
  RuntimeTarget,
} from './port.js';

/** The cluster half of the cloud runtime: run built images (EKS). */
export type Cluster = Pick<Runtime, 'deploy' | 'awaitReady' | 'teardown' | 'logs'>;

/**
 * The cloud runtime: images built on CodeBuild, run on a cluster. Until the cluster adapter exists,
 * deploys fail saying so, and a teardown has nothing to remove (nothing of the environment runs).
 */
export class CloudRuntime implements Runtime {
  constructor(
    readonly images: CodeBuildImages,
    private readonly cluster?: Cluster,
  ) {}

  build(
    target: RuntimeTarget,
    sha: string,
    apps: Record<string, AppSpec>,
    token: string,
    opts?: BuildOptions,
  ) {
    return this.images.build(target, sha, apps, token, opts);
  }

  async deploy(target: RuntimeTarget, apps: AppLaunch[], opts?: DeployOptions) {
    if (!this.cluster) throw clusterMissing();
    return this.cluster.deploy(target, apps, opts);
  }

  async awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string) {
    if (!this.cluster) throw clusterMissing();
    return this.cluster.awaitReady(target, apps, token);
  }

  async teardown(target: RuntimeTarget) {
    if (this.cluster) return this.cluster.teardown(target);
  }

  /** A build's log from CloudWatch Logs (CodeBuild), an app's from its pods (none without a cluster). */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    if (query.source === 'build') return this.images.logs(target, app, query);
    return this.cluster?.logs(target, app, query);
  }
}
