/**
 * Reading a rollout: pure functions over a Deployment and its pods, so the watcher's verdicts can be
 * checked without a cluster.
 *
 * Ready is what `kubectl rollout status` means: the controller has seen the latest spec
 * (observedGeneration ≥ generation), every desired replica is updated, no old replica is left
 * (replicas == updatedReplicas) and the updated ones are available. A rollout fails fast when its
 * Deployment reports ProgressDeadlineExceeded, or when a pod of the current template waits for a reason
 * that won't clear by itself (`FAILING_REASONS`).
 */
import type { V1ContainerStatus, V1Deployment, V1Pod } from '@kubernetes/client-node';

/** Container waiting reasons that end a rollout (they only clear with a new image, spec or secret). */
export const FAILING_REASONS = [
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'InvalidImageName',
] as const;

export type RolloutState =
  | { state: 'ready' }
  | { state: 'progressing'; detail: string }
  | { state: 'failed'; reason: string; message: string };

export function rolloutState(d: V1Deployment): RolloutState {
  const generation = d.metadata?.generation ?? 0;
  const status = d.status ?? {};
  if ((status.observedGeneration ?? 0) < generation)
    return { state: 'progressing', detail: 'waiting for the controller to see the new spec' };
  const progressing = status.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded')
    return {
      state: 'failed',
      reason: 'ProgressDeadlineExceeded',
      message: progressing.message ?? 'the rollout made no progress within its deadline',
    };
  const desired = d.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  const replicas = status.replicas ?? 0;
  const available = status.availableReplicas ?? 0;
  if (updated < desired) return { state: 'progressing', detail: `${updated} of ${desired} replicas updated` };
  if (replicas > updated)
    return { state: 'progressing', detail: `${replicas - updated} old replica(s) pending termination` };
  if (available < updated)
    return { state: 'progressing', detail: `${available} of ${updated} updated replica(s) available` };
  return { state: 'ready' };
}

export interface PodFailure {
  pod: string;
  container: string;
  reason: string;
  message: string;
  /** Whether the container ran before (its last run's log is the one worth reading). */
  ran: boolean;
}

/** The first container of `pod` waiting for a failing reason, if any. */
export function podFailure(pod: V1Pod): PodFailure | undefined {
  const statuses: V1ContainerStatus[] = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ];
  for (const s of statuses) {
    const reason = s.state?.waiting?.reason;
    if (reason && (FAILING_REASONS as readonly string[]).includes(reason))
      return {
        pod: pod.metadata?.name ?? '?',
        container: s.name,
        reason,
        message: s.state?.waiting?.message ?? '',
        ran: (s.restartCount ?? 0) > 0 || s.lastState?.terminated !== undefined,
      };
  }
  return undefined;
}

/** A pod's state in a few words (for a deadline's cause): `Running, not ready`, `Pending: …`. */
export function podSummary(pod: V1Pod): string {
  const s = pod.status?.containerStatuses?.[0];
  const waiting = s?.state?.waiting;
  if (waiting) return `${pod.status?.phase ?? 'Pending'}, waiting: ${waiting.reason ?? '?'}`;
  if (s?.state?.terminated) return `${pod.status?.phase}, terminated: ${s.state.terminated.reason ?? '?'}`;
  return `${pod.status?.phase ?? 'Pending'}${s?.ready ? ', ready' : ', not ready'}`;
}

/** The newest of some pods (by creation time). */
export function newest(pods: V1Pod[]): V1Pod | undefined {
  const t = (p: V1Pod) => new Date(p.metadata?.creationTimestamp ?? 0).getTime();
  return [...pods].sort((a, b) => t(b) - t(a))[0];
}
