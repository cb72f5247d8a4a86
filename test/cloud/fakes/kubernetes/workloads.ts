/**
 * The fake Kubernetes API's Deployments and their pods (index.ts has the story): what the deployment
 * controller, the scheduler and the kubelet would do, one step per Deployment per tick (`step`), and the
 * failures a test injects (`faults`). Test support code, not product.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { clone, type Fault, type Obj } from './protocol.js';
import type { ObjectStore } from './store.js';

export class Workloads {
  constructor(
    private readonly store: ObjectStore,
    /** `<namespace>/<app>` → the failure its not-yet-ready pods get. */
    private readonly faults: Map<string, Fault>,
    /** `<namespace>/<app>` → what its pods log. */
    private readonly appLogs: Map<string, string[]>,
    private readonly history: string[],
  ) {}

  step(d: Obj): void {
    const ns = d.metadata.namespace;
    if (d.spec.replicas === 0) {
      for (const p of this.podsOf(d)) this.store.objects.delete(this.store.key('pods', ns, p.metadata.name));
      d.status = { observedGeneration: d.metadata.generation, replicas: 0, updatedReplicas: 0 };
      return;
    }
    const hash = createHash('sha256').update(JSON.stringify(d.spec.template)).digest('hex').slice(0, 10);
    const pods = this.podsOf(d);
    let current = pods.find((p) => p.metadata.labels?.['pod-template-hash'] === hash);
    d.status ??= {};
    const status = d.status;
    if (status.observedGeneration !== d.metadata.generation) {
      status.observedGeneration = d.metadata.generation;
      current ??= this.createPod(d, hash);
      this.progressing(
        d,
        'True',
        'ReplicaSetUpdated',
        `ReplicaSet "${d.metadata.name}-${hash}" is progressing.`,
      );
      this.recount(d, hash);
      return;
    }
    if (!current) {
      this.createPod(d, hash);
      this.recount(d, hash);
      return;
    }
    if (!this.isReady(current)) {
      const app = d.metadata.labels?.app ?? d.metadata.name;
      const fault = this.faults.get(`${ns}/${app}`) ?? this.missingSecret(current);
      if (fault) this.fail(d, current, hash, fault);
      else {
        this.markReady(current);
        if (status.conditions?.some((c: Obj) => c.reason === 'ProgressDeadlineExceeded'))
          this.progressing(
            d,
            'True',
            'ReplicaSetUpdated',
            `ReplicaSet "${d.metadata.name}-${hash}" is progressing.`,
          );
      }
      this.recount(d, hash);
      return;
    }
    const old = pods.filter((p) => p !== current);
    if (old.length) {
      for (const p of old) this.store.objects.delete(this.store.key('pods', ns, p.metadata.name));
      this.progressing(
        d,
        'True',
        'NewReplicaSetAvailable',
        `ReplicaSet "${d.metadata.name}-${hash}" has successfully progressed.`,
      );
      this.recount(d, hash);
      return;
    }
    if (!status.conditions?.some((c: Obj) => c.reason === 'NewReplicaSetAvailable')) {
      this.progressing(
        d,
        'True',
        'NewReplicaSetAvailable',
        `ReplicaSet "${d.metadata.name}-${hash}" has successfully progressed.`,
      );
      this.recount(d, hash);
    }
  }

  private podsOf(d: Obj): Obj[] {
    return this.store
      .all('pods')
      .filter(
        (p) =>
          p.metadata.namespace === d.metadata.namespace &&
          p.metadata.annotations?.['fake.kubernetes/deployment'] === d.metadata.name,
      );
  }

  private createPod(d: Obj, hash: string): Obj {
    const ns = d.metadata.namespace;
    const name = `${d.metadata.name}-${hash}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const app = d.metadata.labels?.app ?? d.metadata.name;
    const container = d.spec.template.spec.containers[0];
    const pod: Obj = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: this.store.nextRv(),
        creationTimestamp: new Date().toISOString(),
        labels: { ...(d.spec.template.metadata?.labels ?? {}), 'pod-template-hash': hash },
        annotations: {
          ...(d.spec.template.metadata?.annotations ?? {}),
          'fake.kubernetes/deployment': d.metadata.name,
        },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: `${d.metadata.name}-${hash}`,
            uid: randomUUID(),
            controller: true,
          },
        ],
      },
      spec: clone(d.spec.template.spec),
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'True' }],
        containerStatuses: [
          {
            name: container.name,
            image: container.image,
            imageID: '',
            ready: false,
            started: false,
            restartCount: 0,
            state: { waiting: { reason: 'ContainerCreating' } },
          },
        ],
      },
    };
    this.store.objects.set(this.store.key('pods', ns, name), pod);
    this.history.push(`pod ${ns}/${d.metadata.name}`);
    const logs = this.appLogs.get(`${ns}/${app}`);
    if (logs) this.store.podLogs.set(`${ns}/${name}`, logs);
    return pod;
  }

  missingSecret(pod: Obj): Fault | undefined {
    for (const from of pod.spec.containers[0].envFrom ?? []) {
      const name = from.secretRef?.name;
      if (
        name &&
        !from.secretRef.optional &&
        !this.store.objects.has(this.store.key('secrets', pod.metadata.namespace, name))
      )
        return { reason: 'CreateContainerConfigError', message: `secret "${name}" not found` };
    }
    return undefined;
  }

  isReady(pod: Obj): boolean {
    return pod.status?.containerStatuses?.[0]?.ready === true;
  }

  private markReady(pod: Obj): void {
    const now = new Date().toISOString();
    const s = pod.status.containerStatuses[0];
    pod.status.phase = 'Running';
    pod.status.conditions = [
      { type: 'PodScheduled', status: 'True' },
      { type: 'Ready', status: 'True' },
      { type: 'ContainersReady', status: 'True' },
    ];
    pod.status.containerStatuses[0] = {
      ...s,
      ready: true,
      started: true,
      state: { running: { startedAt: now } },
    };
    delete pod.status.containerStatuses[0].lastState;
    pod.metadata.resourceVersion = this.store.nextRv();
  }

  private fail(d: Obj, pod: Obj, hash: string, fault: Fault): void {
    const s = pod.status.containerStatuses[0];
    const image = s.image;
    const now = new Date().toISOString();
    const waiting = (reason: string, message: string) => ({ waiting: { reason, message } });
    switch (fault.reason) {
      case 'CrashLoopBackOff':
        pod.status.phase = 'Running';
        pod.status.containerStatuses[0] = {
          ...s,
          ready: false,
          started: false,
          restartCount: 3,
          state: waiting(
            'CrashLoopBackOff',
            fault.message ??
              `back-off 40s restarting failed container=${s.name} pod=${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`,
          ),
          lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: now, finishedAt: now } },
        };
        break;
      case 'ImagePullBackOff':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting('ImagePullBackOff', fault.message ?? `Back-off pulling image "${image}"`),
        };
        break;
      case 'ErrImagePull':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting(
            'ErrImagePull',
            fault.message ??
              `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": not found`,
          ),
        };
        break;
      case 'CreateContainerConfigError':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting('CreateContainerConfigError', fault.message ?? "couldn't find key in Secret"),
        };
        break;
      case 'ProgressDeadlineExceeded':
        pod.status.phase = 'Running';
        pod.status.containerStatuses[0] = {
          ...s,
          ready: false,
          started: true,
          state: { running: { startedAt: now } },
        };
        this.progressing(
          d,
          'False',
          'ProgressDeadlineExceeded',
          fault.message ?? `ReplicaSet "${d.metadata.name}-${hash}" has timed out progressing.`,
        );
        break;
    }
    pod.metadata.resourceVersion = this.store.nextRv();
  }

  private progressing(d: Obj, status: 'True' | 'False', reason: string, message: string): void {
    const now = new Date().toISOString();
    const others = (d.status.conditions ?? []).filter((c: Obj) => c.type !== 'Progressing');
    d.status.conditions = [
      ...others,
      { type: 'Progressing', status, reason, message, lastUpdateTime: now, lastTransitionTime: now },
    ];
  }

  private recount(d: Obj, hash: string): void {
    const pods = this.podsOf(d);
    const ready = pods.filter((p) => this.isReady(p)).length;
    const s = d.status;
    s.replicas = pods.length;
    s.updatedReplicas = pods.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash).length;
    s.readyReplicas = ready;
    s.availableReplicas = ready;
    s.unavailableReplicas = Math.max(0, (d.spec.replicas ?? 1) - ready);
    const now = new Date().toISOString();
    s.conditions = [
      {
        type: 'Available',
        status: ready >= (d.spec.replicas ?? 1) ? 'True' : 'False',
        reason: ready >= (d.spec.replicas ?? 1) ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
        lastUpdateTime: now,
        lastTransitionTime: now,
      },
      ...(s.conditions ?? []).filter((c: Obj) => c.type !== 'Available'),
    ];
    d.metadata.resourceVersion = this.store.nextRv();
  }
}
