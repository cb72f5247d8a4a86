/**
 * The fake Kubernetes API's controllers (index.ts has the story), run by `tick()`: namespaces that
 * terminate, Deployments' rollouts (workloads.ts), Jobs (a pod, then its exit as `jobOutcomes` says) and
 * CloudNativePG Clusters (set up, then healthy, unless `clusterPhases` holds one). Test support code, not
 * product.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { clone, type Fault, type Obj } from './protocol.js';
import type { ObjectStore } from './store.js';
import { Workloads } from './workloads.js';

export class Controller {
  /** `<namespace>/<app>` → the failure its not-yet-ready pods get. */
  readonly faults = new Map<string, Fault>();
  /** `<namespace>/<app>` → what its pods log. */
  readonly appLogs = new Map<string, string[]>();
  /** A Job's command → how it ends. */
  readonly jobOutcomes = new Map<string, { exitCode: number; logs: string[] }>();
  /** `<ns>/<cluster>` → the phase a CloudNativePG Cluster stays in instead of becoming healthy. */
  readonly clusterPhases = new Map<string, string>();
  /** In order: `job started <ns>/<name>`, `job succeeded|failed <ns>/<name>`, `pod <ns>/<deployment>`. */
  readonly history: string[] = [];
  private readonly workloads: Workloads;

  constructor(private readonly store: ObjectStore) {
    this.workloads = new Workloads(store, this.faults, this.appLogs, this.history);
  }

  /** One step of every Deployment's rollout and every terminating namespace's removal. */
  tick(): void {
    for (const [ns, ticks] of [...this.store.terminating.entries()]) {
      if (ticks === 0) {
        for (const key of [...this.store.objects.keys()])
          if (key.split('/')[1] === ns && !key.startsWith('namespaces/')) this.store.objects.delete(key);
        this.store.terminating.set(ns, 1);
      } else {
        this.store.objects.delete(this.store.key('namespaces', '', ns));
        this.store.terminating.delete(ns);
      }
    }
    // Pods whose Deployment is gone.
    for (const pod of this.store.all('pods')) {
      const owner = pod.metadata.annotations?.['fake.kubernetes/deployment'];
      if (owner && !this.store.objects.has(this.store.key('deployments', pod.metadata.namespace, owner)))
        this.store.objects.delete(this.store.key('pods', pod.metadata.namespace, pod.metadata.name));
    }
    for (const d of this.store.all('deployments')) {
      if (this.store.terminating.has(d.metadata.namespace)) continue;
      this.workloads.step(d);
    }
    for (const job of this.store.all('jobs'))
      if (!this.store.terminating.has(job.metadata.namespace)) this.stepJob(job);
    for (const c of this.store.all('clusters'))
      if (!this.store.terminating.has(c.metadata.namespace)) this.stepCluster(c);
  }

  private stepJob(job: Obj): void {
    const ns = job.metadata.namespace;
    job.status ??= {};
    const status = job.status;
    if (status.succeeded || status.failed) return;
    const now = new Date().toISOString();
    const podName = `${job.metadata.name}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const container = job.spec.template.spec.containers[0];
    const pod = this.store
      .all('pods')
      .find((p) => p.metadata.namespace === ns && p.metadata.labels?.['job-name'] === job.metadata.name);
    if (!pod) {
      const labels = {
        ...(job.spec.template.metadata?.labels ?? {}),
        'job-name': job.metadata.name,
        'batch.kubernetes.io/job-name': job.metadata.name,
      };
      this.store.objects.set(this.store.key('pods', ns, podName), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: podName,
          namespace: ns,
          uid: randomUUID(),
          resourceVersion: this.store.nextRv(),
          creationTimestamp: now,
          labels,
          ownerReferences: [
            { apiVersion: 'batch/v1', kind: 'Job', name: job.metadata.name, controller: true },
          ],
        },
        spec: clone(job.spec.template.spec),
        status: {
          phase: 'Running',
          containerStatuses: [
            {
              name: container.name,
              image: container.image,
              ready: true,
              restartCount: 0,
              state: { running: { startedAt: now } },
            },
          ],
        },
      });
      Object.assign(status, { startTime: now, active: 1 });
      job.metadata.resourceVersion = this.store.nextRv();
      this.history.push(`job started ${ns}/${job.metadata.name}`);
      return;
    }
    const command = container.command?.[2] ?? container.args?.[1] ?? '';
    const missing = this.workloads.missingSecret(pod) ?? this.missingKeyRef(pod);
    const outcome = missing
      ? { exitCode: undefined, logs: [] }
      : (this.jobOutcomes.get(command) ?? { exitCode: 0, logs: [] });
    const s0 = pod.status.containerStatuses[0];
    pod.status.phase = outcome.exitCode === 0 ? 'Succeeded' : 'Failed';
    pod.status.containerStatuses[0] = {
      ...s0,
      ready: false,
      state: missing
        ? { waiting: { reason: 'CreateContainerConfigError', message: missing.message } }
        : {
            terminated: {
              exitCode: outcome.exitCode,
              reason: outcome.exitCode === 0 ? 'Completed' : 'Error',
              startedAt: s0.state?.running?.startedAt ?? now,
              finishedAt: now,
            },
          },
    };
    pod.metadata.resourceVersion = this.store.nextRv();
    this.store.podLogs.set(`${ns}/${pod.metadata.name}`, outcome.logs);
    const ok = outcome.exitCode === 0;
    Object.assign(status, {
      active: 0,
      ...(ok ? { succeeded: 1, completionTime: now } : { failed: 1 }),
      conditions: [
        ok
          ? { type: 'Complete', status: 'True', lastTransitionTime: now }
          : {
              type: 'Failed',
              status: 'True',
              reason: 'BackoffLimitExceeded',
              message: 'Job has reached the specified backoff limit',
              lastTransitionTime: now,
            },
      ],
    });
    job.metadata.resourceVersion = this.store.nextRv();
    this.history.push(`job ${ok ? 'succeeded' : 'failed'} ${ns}/${job.metadata.name}`);
  }

  /** A `secretKeyRef` of the pod's container whose Secret or key is missing. */
  private missingKeyRef(pod: Obj): Fault | undefined {
    for (const e of pod.spec.containers[0].env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref || ref.optional) continue;
      const secret = this.store.objects.get(this.store.key('secrets', pod.metadata.namespace, ref.name));
      if (!secret) return { reason: 'CreateContainerConfigError', message: `secret "${ref.name}" not found` };
      if (secret.data?.[ref.key] === undefined)
        return {
          reason: 'CreateContainerConfigError',
          message: `couldn't find key ${ref.key} in Secret ${pod.metadata.namespace}/${ref.name}`,
        };
    }
    return undefined;
  }

  private stepCluster(c: Obj): void {
    const ns = c.metadata.namespace;
    c.status ??= {};
    const status = c.status;
    if (status.phase === 'Cluster in healthy state') return;
    const secrets = [
      c.spec.bootstrap?.initdb?.secret?.name,
      ...(c.spec.externalClusters ?? []).map((e: Obj) => e.password?.name),
    ].filter(Boolean);
    const missing = secrets.find(
      (name: string) => !this.store.objects.has(this.store.key('secrets', ns, name)),
    );
    const held = this.clusterPhases.get(`${ns}/${c.metadata.name}`);
    if (held) {
      if (status.phase !== held) {
        Object.assign(status, { phase: held, instances: c.spec.instances, readyInstances: 0 });
        c.metadata.resourceVersion = this.store.nextRv();
      }
      return;
    }
    if (!status.phase || missing) {
      Object.assign(status, {
        phase: 'Setting up primary',
        ...(missing ? { phaseReason: `secret ${missing} not found` } : {}),
        instances: c.spec.instances,
        readyInstances: 0,
      });
      c.metadata.resourceVersion = this.store.nextRv();
      return;
    }
    const rw = `${c.metadata.name}-rw`;
    if (!this.store.objects.has(this.store.key('services', ns, rw)))
      this.store.create('services', ns, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: rw, namespace: ns, labels: { 'cnpg.io/cluster': c.metadata.name } },
        spec: { selector: { 'cnpg.io/cluster': c.metadata.name }, ports: [{ port: 5432, name: 'postgres' }] },
      });
    Object.assign(status, {
      phase: 'Cluster in healthy state',
      phaseReason: undefined,
      readyInstances: c.spec.instances,
      writeService: rw,
      currentPrimary: `${c.metadata.name}-1`,
    });
    c.metadata.resourceVersion = this.store.nextRv();
  }
}
