/**
 * The worker manifest: Lambdas that are neither API routes, state-machine steps nor event-rule targets,
 * invoked by the service itself. CDK builds one function per entry (with an on-failure destination, since
 * they are invoked asynchronously) and grants its `access`. Plain data, like the other manifests.
 */
import type { RouteAccess } from './access.js';

export interface WorkerDef {
  /** Handler module, relative to the repository root; it exports `handler`. */
  entry: string;
  description: string;
  /** Lambda timeout: a worker plans its work within it (the watcher hands over to itself before it ends). */
  timeoutSeconds: number;
  access: Omit<RouteAccess, 'starts'>;
  /**
   * Who invokes it asynchronously: the functions with `invokesWatcher` access (they get
   * lambda:InvokeFunction on it and its name).
   */
  invokedBy: 'invokesWatcher';
}

export const workers = {
  /**
   * Watches a rollout on EKS and ends the DeployApps task (`ROLLOUT_WATCHER_FUNCTION`): invoked by the
   * runtime's awaitReady, then by itself until the rollout ends or its deadline passes.
   */
  rolloutWatcher: {
    entry: 'functions/watchers/rollout.ts',
    description: 'Watch an environment rollout on EKS and end the DeployApps task',
    timeoutSeconds: 900,
    // The cluster, its own next invocation (a policy of its own) and the DeployApps task (end, heartbeat).
    access: { tables: {}, runtime: true, invokesWatcher: true, completesTasks: true },
    invokedBy: 'invokesWatcher',
  },
} as const satisfies Record<string, WorkerDef>;

export type WorkerId = keyof typeof workers;
