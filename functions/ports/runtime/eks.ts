/**
 * The EKS cluster half of the cloud runtime (`Cluster` of cloud.ts): a namespace per environment on the
 * customer's EKS cluster, each app an image in a Deployment behind a Service and an https Ingress. The
 * objects are eks-objects.ts; the API calls go through the real `@kubernetes/client-node` (eks-client.ts),
 * reached with the endpoint and CA `eks:DescribeCluster` gives and an STS-presigned bearer token
 * (eks-auth.ts).
 *
 * **Fencing by generation.** The namespace's `preview-control-plane/generation` annotation is the
 * environment's fence: a call of an older generation changes nothing and throws `Superseded`; a newer one
 * bumps it (a compare-and-set on the namespace's resourceVersion). Every object carries the generation
 * that wrote it too, and is written with optimistic concurrency, so of two deploys racing, the older never
 * overwrites what the newer wrote. A teardown leaves a fence behind the namespace it deletes (a ConfigMap in
 * `systemNamespace`, eks-objects.ts `fenceObject`), so a late call of an older generation can't re-create
 * it either.
 *
 * **deploy** applies, per app, its Secret, Deployment, Service and Ingress (create, or replace when what
 * was written differs: the same content is not rewritten, so an unchanged app does not roll); plus the
 * namespace's ResourceQuota and NetworkPolicy. Only the apps passed are touched; `prune` (a whole
 * environment deploy) deletes the objects of apps no longer passed.
 * - **rebuild vs restart.** Without `restart`, an app's Deployment gets the launch's `image` (a rebuild
 *   rolls that app to its new image; an app whose image, env and secret bundle are unchanged does not
 *   roll). With `restart: true`, the app's Secret is re-synced from the bundle and its Deployment is
 *   merge-patched on the pod template only (`kubectl.kubernetes.io/restartedAt`, the bundle's version and
 *   the rollout label), keeping the running image: the launch's `image` is not needed and not used (unless
 *   the app has no Deployment yet, where the full apply runs). Siblings are never touched.
 *
 * **awaitReady** starts the rollout watcher (a Lambda, `functions/watchers/rollout.ts`, invoked
 * asynchronously) and returns. The watcher (`watch`) checks every `pollMs` for up to `sliceMs` per
 * invocation, then invokes itself again, until every app is ready (the token completes with their https
 * URLs), one fails (`DeployFailed` naming the app, the reason, and its last log lines with the secret
 * values masked), a newer generation owns the environment (`Superseded`), or the deadline passes. So the
 * state machine pays two transitions per deploy however long the rollout takes.
 *
 * **teardown** writes the fence, deletes the namespace with foreground propagation and waits (bounded,
 * `teardownWaitMs`) until it is gone; still there then, it throws `TransientError` (the state machine
 * retries, and the retry waits again), so the environment becomes torn_down only once the namespace is gone.
 */
import { DescribeClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { V1Namespace } from '@kubernetes/client-node';
import { ConfigError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { maskSecrets } from '../../shared/mask.js';
import { DeployFailed, Superseded, TransientError } from '../../shared/step-errors.js';
import type { TaskOutcome } from '../workflows/port.js';
import { type AppAddress, resolveAppRefs } from './app-refs.js';
import type { Cluster } from './cloud.js';
import { type CredentialProvider, EksTokens } from './eks-auth.js';
import { connect, isCode, type Kube, KubeError, type Resource } from './eks-client.js';
import {
  ANNOTATIONS,
  appSelector,
  deploymentObject,
  fenceName,
  fenceObject,
  generationOf,
  ingressObject,
  internalUrl,
  LABELS,
  MANAGED_BY,
  NETWORK_POLICY_NAME,
  namespaceName,
  namespaceObject,
  networkPolicyObject,
  type ObjectOptions,
  objectName,
  publicUrl,
  QUOTA_NAME,
  quotaObject,
  restartRollout,
  secretObject,
  secretVars,
  secretVersionOf,
  serviceObject,
  specHashOf,
} from './eks-objects.js';
import { newest, podFailure, podSummary, rolloutState } from './eks-rollout.js';
import { failureMessage } from './log-cause.js';
import type {
  AppLaunch,
  AppSpec,
  DeployOptions,
  LogQuery,
  LogTarget,
  LogText,
  RuntimeTarget,
} from './port.js';

export { internalUrl, namespaceName, publicUrl } from './eks-objects.js';

/** What the rollout watcher is invoked with. No secret values: it reads what it masks from the cluster. */
export interface RolloutWatchEvent {
  target: RuntimeTarget;
  /** Every app of the environment (the token's URLs are theirs). */
  apps: string[];
  token: string;
  /** Epoch ms: past it, the token fails with what was still pending. */
  deadline: number;
  /** How many invocations watched before this one. */
  hop: number;
  startedAt: number;
}

export type WatchOutcome = 'ready' | 'failed' | 'superseded' | 'timed-out' | 'continued' | 'abandoned';

export interface EksTiming {
  /** Between two readiness checks (readiness is noticed within this, plus the probe's period). */
  pollMs: number;
  /** How long one watcher invocation watches before it hands over to the next (capped by its timeout). */
  sliceMs: number;
  /** From awaitReady to giving up (DeployFailed with what was pending). */
  readyTimeoutMs: number;
  /** How long teardown waits for the namespace to be gone before it throws TransientError. */
  teardownWaitMs: number;
  /** How long deploy waits for a namespace a teardown is still deleting. */
  namespaceWaitMs: number;
  /** Between two task heartbeats from the watcher (when `heartbeat` is given). */
  heartbeatMs: number;
}

export const TIMING_DEFAULTS: EksTiming = {
  pollMs: 2_000,
  sliceMs: 10 * 60_000,
  readyTimeoutMs: 20 * 60_000,
  teardownWaitMs: 120_000,
  namespaceWaitMs: 30_000,
  heartbeatMs: 60_000,
};
/** A watcher stops this long before its invocation's time runs out, to hand over in time. */
const SLICE_MARGIN_MS = 15_000;
const LOG_TAIL_LINES = 20;
const LOG_TAIL_CHARS = 1500;
/** How many of a failed pod's last log lines are searched for its cause. */
const CAUSE_SEARCH_LINES = 200;

export interface EksClusterOptions extends ObjectOptions {
  clusterName: string;
  region: string;
  /** Ends a callback task (`Workflows.completeTask`). */
  complete: (token: string, outcome: TaskOutcome) => Promise<void>;
  /**
   * Sends a task heartbeat (`Workflows.heartbeat`), at the start of every watcher invocation and every
   * `heartbeatMs`. Answering 'gone' (the task no longer waits) stops the watcher. Without it the watcher
   * sends none, so the waiting state must then have no HeartbeatSeconds.
   */
  heartbeat?: (token: string) => Promise<undefined | 'gone'>;
  /**
   * Starts a watcher invocation asynchronously. Default: Lambda `Invoke` (InvocationType `Event`) of
   * `watcherFunction`. Tests run the watcher in-process instead.
   */
  invokeWatcher?: (event: RolloutWatchEvent) => Promise<void>;
  /** The watcher Lambda's name or ARN (default: `ROLLOUT_WATCHER_FUNCTION`). */
  watcherFunction?: string;
  /** Created once per container when not given (no explicit endpoint: `AWS_ENDPOINT_URL_EKS` applies). */
  eks?: EKSClient;
  lambda?: LambdaClient;
  /** What signs the cluster tokens. Default: the EKS client's (the SDK's default credential chain). */
  credentials?: CredentialProvider;
  stsHost?: string;
  /** Where teardown fences live (created on first use). Default `preview-system`. */
  systemNamespace?: string;
  timing?: Partial<EksTiming>;
}

type Kind = Exclude<keyof Kube, 'podLog'>;
type ObjOf<K extends Kind> = Kube[K] extends Resource<infer T> ? T : never;

type AppVerdict =
  | { kind: 'ready' }
  | { kind: 'pending'; detail: string }
  | { kind: 'failed'; cause: string }
  | { kind: 'superseded'; cause: string };
type Verdict =
  | { kind: 'ready'; urls: Record<string, string> }
  | { kind: 'pending'; detail: string }
  | { kind: 'failed'; cause: string }
  | { kind: 'superseded'; cause: string };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const terminating = (ns: V1Namespace | undefined) =>
  ns !== undefined && (ns.metadata?.deletionTimestamp !== undefined || ns.status?.phase === 'Terminating');

export class EksCluster implements Cluster {
  readonly timing: EksTiming;
  private readonly eks: EKSClient;
  private lambda?: LambdaClient;
  private readonly tokens: EksTokens;
  private kube?: Promise<Kube>;
  private readonly systemNamespace: string;

  constructor(private readonly opts: EksClusterOptions) {
    this.timing = { ...TIMING_DEFAULTS, ...opts.timing };
    this.eks = opts.eks ?? new EKSClient({ region: opts.region });
    this.lambda = opts.lambda;
    this.systemNamespace = opts.systemNamespace ?? 'preview-system';
    this.tokens = new EksTokens({
      clusterName: opts.clusterName,
      region: opts.region,
      stsHost: opts.stsHost,
      credentials: opts.credentials ?? (() => this.eks.config.credentials()),
    });
  }

  /** The namespace of an environment. */
  namespaceOf(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>): string {
    return namespaceName(target);
  }

  /** The https URL of an app. */
  urlOf(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>, app: string): string {
    return publicUrl(namespaceName(target), app, this.opts.domain);
  }

  // ---- deploy ----------------------------------------------------------------------------------------

  async deploy(target: RuntimeTarget, launches: AppLaunch[], opts: DeployOptions = {}): Promise<void> {
    const ns = namespaceName(target);
    const gen = target.generation;
    const addresses: Record<string, AppAddress> = {};
    for (const name of opts.apps ?? launches.map((a) => a.name))
      addresses[name] = {
        url: publicUrl(ns, name, this.opts.domain),
        internalUrl: internalUrl(target, name),
      };
    const apps = launches.map((a) => resolveAppRefs(a, addresses));
    const secrets = apps.flatMap((a) => Object.values(secretVars(a)));
    try {
      await this.ensureNamespace(target);
      await this.apply('quotas', ns, QUOTA_NAME, gen, () => quotaObject(ns, gen, this.opts));
      await this.apply('networkPolicies', ns, NETWORK_POLICY_NAME, gen, () =>
        networkPolicyObject(ns, gen, this.opts),
      );
      await Promise.all(
        apps.map((app) => (opts.restart ? this.restartApp(ns, app, gen) : this.applyApp(ns, app, gen))),
      );
      if (opts.prune) await this.prune(ns, new Set(apps.map((a) => a.name)), gen);
      log.info('deployed to the cluster', {
        namespace: ns,
        generation: gen,
        apps: apps.map((a) => a.name).join(','),
        mode: opts.restart ? 'restart' : 'apply',
        prune: Boolean(opts.prune),
      });
    } catch (err) {
      throw await this.explain(err, target, secrets);
    }
  }

  /**
   * The namespace, at the target's generation: created (unless a teardown's fence is as new), or its
   * annotation bumped (compare-and-set). An older target is Superseded; a namespace still being deleted
   * is waited for, briefly.
   */
  private async ensureNamespace(target: RuntimeTarget): Promise<void> {
    const name = namespaceName(target);
    const gen = target.generation;
    const waitUntil = Date.now() + this.timing.namespaceWaitMs;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 20) throw new TransientError(`namespace ${name} kept changing under this deploy`);
      const ns = await this.readOrNull('namespaces', '', name);
      if (ns) {
        refuseForeign(ns);
        const current = generationOf(ns);
        if (current > gen) throw superseded(name, current, gen);
        if (terminating(ns)) {
          if (Date.now() >= waitUntil)
            throw new TransientError(`namespace ${name} is still being deleted by a teardown; retry`);
          await sleep(Math.min(1000, this.timing.pollMs));
          continue;
        }
        if (current === gen) return;
        try {
          await this.call(`annotate Namespace ${name}`, (k) =>
            k.namespaces.patch('', name, {
              metadata: {
                resourceVersion: ns.metadata?.resourceVersion,
                annotations: { [ANNOTATIONS.generation]: String(gen) },
              },
            }),
          );
          return;
        } catch (err) {
          if (isCode(err, 409)) continue;
          throw err;
        }
      }
      const fence = await this.fenceGeneration(name);
      if (fence >= gen) throw new Superseded(`${name} was torn down at generation ${fence}; this is ${gen}`);
      try {
        await this.call(`create Namespace ${name}`, (k) => k.namespaces.create('', namespaceObject(target)));
      } catch (err) {
        if (isCode(err, 409)) continue;
        throw err;
      }
      // A teardown may have fenced between the check and the create: it wins, and the namespace goes.
      const after = await this.fenceGeneration(name);
      if (after >= gen) {
        await this.call(`delete Namespace ${name}`, (k) =>
          k.namespaces.remove('', name, { propagationPolicy: 'Foreground' }),
        ).catch(() => undefined);
        throw new Superseded(`${name} was torn down at generation ${after}; this is ${gen}`);
      }
      return;
    }
  }

  private async applyApp(ns: string, app: AppLaunch, gen: number): Promise<void> {
    const name = objectName(app.name);
    const secret = await this.apply('secrets', ns, name, gen, (existing) =>
      secretObject(ns, app, gen, existing),
    );
    await this.apply('deployments', ns, name, gen, (existing) =>
      deploymentObject(ns, app, secretVersionOf(secret), gen, this.opts, existing),
    );
    await this.apply('services', ns, name, gen, (existing) => {
      const service = serviceObject(ns, app, gen);
      // The allocated cluster IP stays (it is immutable; not part of what was written, so not hashed).
      if (existing?.spec?.clusterIP) {
        service.spec!.clusterIP = existing.spec.clusterIP;
        if (existing.spec.clusterIPs) service.spec!.clusterIPs = existing.spec.clusterIPs;
      }
      return service;
    });
    await this.apply('ingresses', ns, name, gen, () => ingressObject(ns, app, gen, this.opts));
  }

  /** Re-sync the app's Secret, then roll its pods: a merge patch of its pod template, nothing else. */
  private async restartApp(ns: string, app: AppLaunch, gen: number): Promise<void> {
    const name = objectName(app.name);
    const secret = await this.apply('secrets', ns, name, gen, (existing) =>
      secretObject(ns, app, gen, existing),
    );
    for (let attempt = 0; attempt < 5; attempt++) {
      const deployment = await this.readOrNull('deployments', ns, name);
      if (!deployment) return this.applyApp(ns, app, gen);
      const current = generationOf(deployment);
      if (current > gen) throw superseded(`${ns}/${name}`, current, gen);
      const restartedAt = new Date().toISOString();
      try {
        await this.call(`restart Deployment ${ns}/${name}`, (k) =>
          k.deployments.patch(ns, name, {
            metadata: {
              resourceVersion: deployment.metadata?.resourceVersion,
              annotations: { [ANNOTATIONS.generation]: String(gen) },
            },
            spec: {
              template: {
                metadata: {
                  labels: { [LABELS.rollout]: restartRollout(specHashOf(deployment), restartedAt) },
                  annotations: {
                    [ANNOTATIONS.restartedAt]: restartedAt,
                    [ANNOTATIONS.secretVersion]: secretVersionOf(secret),
                  },
                },
              },
            },
          }),
        );
        return;
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
    }
    throw new TransientError(`Deployment ${ns}/${name} kept changing under this restart`);
  }

  /** Delete the objects of apps not in `keep` (Ingress, Service, Deployment, Secret, in that order). */
  private async prune(ns: string, keep: Set<string>, gen: number): Promise<void> {
    for (const kind of ['ingresses', 'services', 'deployments', 'secrets'] as const) {
      const items = await this.call(`list ${kind} in ${ns}`, (k) => k[kind].list(ns, appSelector));
      for (const item of items) {
        const app = item.metadata?.labels?.[LABELS.app];
        const name = item.metadata?.name;
        if (!app || !name || keep.has(app)) continue;
        const current = generationOf(item);
        if (current > gen) throw superseded(`${ns}/${name}`, current, gen);
        try {
          await this.call(`delete ${kind} ${ns}/${name}`, (k) =>
            k[kind].remove(ns, name, { resourceVersion: item.metadata?.resourceVersion }),
          );
        } catch (err) {
          if (!isCode(err, 404)) throw err;
        }
      }
    }
  }

  /**
   * Create or replace one object, fenced: an object written by a newer generation is Superseded; one
   * whose content hash matches is left alone (only its generation annotation is bumped); any write races
   * (409) are re-read and retried.
   */
  private async apply<K extends Kind>(
    kind: K,
    ns: string,
    name: string,
    gen: number,
    build: (existing?: ObjOf<K>) => ObjOf<K>,
  ): Promise<ObjOf<K>> {
    const res = (k: Kube) => k[kind] as unknown as Resource<ObjOf<K>>;
    const label = `${kind} ${ns}/${name}`;
    for (let attempt = 0; attempt < 5; attempt++) {
      const existing = await this.readOrNull(kind, ns, name);
      const desired = build(existing);
      try {
        if (!existing) return await this.call(`create ${label}`, (k) => res(k).create(ns, desired));
        const current = generationOf(existing);
        if (current > gen) throw superseded(label, current, gen);
        if (specHashOf(existing) === specHashOf(desired)) {
          if (current === gen) return existing;
          return await this.call(`annotate ${label}`, (k) =>
            res(k).patch(ns, name, {
              metadata: {
                resourceVersion: existing.metadata?.resourceVersion,
                annotations: { [ANNOTATIONS.generation]: String(gen) },
              },
            }),
          );
        }
        desired.metadata!.resourceVersion = existing.metadata?.resourceVersion;
        return await this.call(`replace ${label}`, (k) => res(k).replace(ns, name, desired));
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
    }
    throw new TransientError(`${label} kept changing under this deploy`);
  }

  // ---- teardown --------------------------------------------------------------------------------------

  async teardown(target: RuntimeTarget): Promise<void> {
    const name = namespaceName(target);
    const gen = target.generation;
    try {
      for (let attempt = 0; ; attempt++) {
        if (attempt > 5) throw new TransientError(`namespace ${name} kept changing under this teardown`);
        const ns = await this.readOrNull('namespaces', '', name);
        if (ns) refuseForeign(ns);
        const current = generationOf(ns);
        if (ns && current > gen) throw superseded(name, current, gen);
        await this.writeFence(target);
        if (!ns) break;
        if (!terminating(ns) && current < gen) {
          try {
            await this.call(`annotate Namespace ${name}`, (k) =>
              k.namespaces.patch('', name, {
                metadata: {
                  resourceVersion: ns.metadata?.resourceVersion,
                  annotations: { [ANNOTATIONS.generation]: String(gen) },
                },
              }),
            );
          } catch (err) {
            if (isCode(err, 409)) continue;
            if (!isCode(err, 404)) throw err;
          }
        }
        try {
          await this.call(`delete Namespace ${name}`, (k) =>
            k.namespaces.remove('', name, { propagationPolicy: 'Foreground' }),
          );
        } catch (err) {
          // 404: already gone; 409: already terminating.
          if (!isCode(err, 404) && !isCode(err, 409)) throw err;
        }
        break;
      }
      await this.waitGone(name);
      log.info('namespace removed', { namespace: name, generation: gen });
    } catch (err) {
      throw await this.explain(err, target, []);
    }
  }

  private async waitGone(name: string): Promise<void> {
    const until = Date.now() + this.timing.teardownWaitMs;
    for (;;) {
      const ns = await this.readOrNull('namespaces', '', name);
      if (!ns) return;
      if (Date.now() >= until)
        throw new TransientError(
          `namespace ${name} is still terminating after ${Math.round(this.timing.teardownWaitMs / 1000)} s ` +
            `(a finalizer may hold it: kubectl get namespace ${name} -o yaml); the teardown will be retried`,
        );
      await sleep(Math.min(1000, this.timing.pollMs));
    }
  }

  /** Record that the environment was torn down at `target.generation` (never lowering a newer fence). */
  private async writeFence(target: RuntimeTarget): Promise<void> {
    const sys = this.systemNamespace;
    const name = fenceName(namespaceName(target));
    for (let attempt = 0; attempt < 5; attempt++) {
      const existing = await this.readOrNull('configMaps', sys, name);
      try {
        if (existing) {
          const current = generationOf(existing);
          if (current > target.generation) throw superseded(name, current, target.generation);
          if (current === target.generation) return;
          await this.call(`replace ConfigMap ${sys}/${name}`, (k) =>
            k.configMaps.replace(sys, name, fenceObject(sys, target, existing.metadata?.resourceVersion)),
          );
          return;
        }
        await this.call(`create ConfigMap ${sys}/${name}`, (k) =>
          k.configMaps.create(sys, fenceObject(sys, target)),
        );
        return;
      } catch (err) {
        if (isCode(err, 404) && !existing) {
          await this.call(`create Namespace ${sys}`, (k) =>
            k.namespaces.create('', {
              apiVersion: 'v1',
              kind: 'Namespace',
              metadata: { name: sys, labels: { [LABELS.managedBy]: MANAGED_BY } },
            }),
          ).catch((e) => {
            if (!isCode(e, 409)) throw e;
          });
          continue;
        }
        if (!isCode(err, 409)) throw err;
      }
    }
    throw new TransientError(`the teardown fence ${sys}/${name} kept changing`);
  }

  /** The generation of the teardown that last removed this namespace (0: never torn down). */
  private async fenceGeneration(namespace: string): Promise<number> {
    return generationOf(await this.readOrNull('configMaps', this.systemNamespace, fenceName(namespace)));
  }

  // ---- readiness -------------------------------------------------------------------------------------

  async awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string): Promise<void> {
    const now = Date.now();
    const event: RolloutWatchEvent = {
      target,
      apps: Object.keys(apps).sort(),
      token,
      deadline: now + this.timing.readyTimeoutMs,
      hop: 0,
      startedAt: now,
    };
    await this.startWatcher(event);
  }

  private async startWatcher(event: RolloutWatchEvent): Promise<void> {
    try {
      await (this.opts.invokeWatcher ?? ((e) => this.invokeLambda(e)))(event);
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new TransientError(`could not start the rollout watcher: ${(err as Error).message}`);
    }
  }

  private async invokeLambda(event: RolloutWatchEvent): Promise<void> {
    const fn = this.opts.watcherFunction ?? process.env.ROLLOUT_WATCHER_FUNCTION;
    if (!fn) throw new ConfigError('ROLLOUT_WATCHER_FUNCTION is not set: the stack sets it for the runtime');
    this.lambda ??= new LambdaClient({ region: this.opts.region });
    const out = await this.lambda.send(
      new InvokeCommand({
        FunctionName: fn,
        InvocationType: 'Event',
        Payload: Buffer.from(JSON.stringify(event)),
      }),
    );
    if (out.StatusCode !== 202)
      throw new Error(`Lambda answered ${out.StatusCode} to an asynchronous invoke`);
  }

  /**
   * One watcher invocation: check every `pollMs` until the rollout ends (the token is completed), the
   * deadline passes (DeployFailed), or this invocation's slice is used up (the next one is started).
   * `remainingMs` is the invocation's own time left (Lambda's `getRemainingTimeInMillis`).
   */
  async watch(event: RolloutWatchEvent, remainingMs: () => number = () => Number.POSITIVE_INFINITY) {
    const t = this.timing;
    const sliceEnd = Date.now() + Math.max(1000, Math.min(t.sliceMs, remainingMs() - SLICE_MARGIN_MS));
    const fields = { namespace: namespaceName(event.target), generation: event.target.generation };
    let lastBeat = Number.NEGATIVE_INFINITY;
    let pending = 'not checked yet';
    for (;;) {
      if (this.opts.heartbeat && Date.now() - lastBeat >= t.heartbeatMs) {
        lastBeat = Date.now();
        try {
          if ((await this.opts.heartbeat(event.token)) === 'gone') {
            log.info('rollout watch abandoned: the task no longer waits', fields);
            return this.outcome('abandoned', event);
          }
        } catch (err) {
          log.warn('task heartbeat failed', { ...fields, error: (err as Error).name });
        }
      }
      let verdict: Verdict;
      try {
        verdict = await this.check(event);
      } catch (err) {
        const e = KubeError.from('check the rollout', err);
        log.warn('rollout check failed', { ...fields, code: e.code, reason: e.reason });
        // Refused (the runtime's access to the cluster is wrong): that won't pass by waiting.
        if (e.code === 401 || e.code === 403)
          verdict = { kind: 'failed', cause: `the cluster refused to ${e.message}` };
        // Not answered this time: keep watching until the deadline.
        else verdict = { kind: 'pending', detail: `the cluster did not answer (${e.code || 'unreachable'})` };
      }
      if (verdict.kind !== 'pending') {
        await this.finish(event, verdict);
        log.info('rollout watch ended', { ...fields, outcome: verdict.kind, hop: event.hop });
        return this.outcome(verdict.kind, event);
      }
      pending = verdict.detail;
      const now = Date.now();
      if (now >= event.deadline) {
        const seconds = Math.round((event.deadline - event.startedAt) / 1000);
        const within = seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
        await this.opts.complete(event.token, {
          ok: false,
          error: 'DeployFailed',
          cause: `not ready within ${within}: ${pending}`,
        });
        log.info('rollout watch ended', { ...fields, outcome: 'timed-out', hop: event.hop });
        return this.outcome('timed-out', event);
      }
      if (now + t.pollMs >= sliceEnd) {
        await this.startWatcher({ ...event, hop: event.hop + 1 });
        log.info('rollout watch continues in a new invocation', { ...fields, hop: event.hop + 1 });
        return this.outcome('continued', event);
      }
      await sleep(Math.min(t.pollMs, event.deadline - now));
    }
  }

  private outcome(outcome: WatchOutcome, event: RolloutWatchEvent) {
    return { outcome, hop: event.hop };
  }

  private async finish(event: RolloutWatchEvent, verdict: Exclude<Verdict, { kind: 'pending' }>) {
    const outcome: TaskOutcome =
      verdict.kind === 'ready'
        ? { ok: true, output: { urls: verdict.urls } }
        : {
            ok: false,
            error: verdict.kind === 'failed' ? 'DeployFailed' : 'Superseded',
            cause: verdict.cause,
          };
    await this.opts.complete(event.token, outcome);
  }

  /** One look at the environment's rollout. */
  private async check(event: RolloutWatchEvent): Promise<Verdict> {
    const { target } = event;
    const name = namespaceName(target);
    const ns = await this.readOrNull('namespaces', '', name);
    const current = generationOf(ns);
    if (current > target.generation)
      return { kind: 'superseded', cause: `generation ${current} owns ${name} now` };
    if (!ns || terminating(ns)) {
      const fence = await this.fenceGeneration(name);
      if (fence >= target.generation)
        return { kind: 'superseded', cause: `a teardown (generation ${fence}) removed ${name}` };
      return {
        kind: 'failed',
        cause: `namespace ${name} ${ns ? 'is being deleted' : 'is gone'}, though no teardown asked for it`,
      };
    }
    const verdicts = await Promise.all(
      event.apps.map(async (app) => [app, await this.checkApp(target, name, app)] as const),
    );
    const superseded = verdicts.find(([, v]) => v.kind === 'superseded');
    if (superseded) return superseded[1] as Verdict;
    const failed = verdicts.filter(([, v]) => v.kind === 'failed');
    if (failed.length)
      return { kind: 'failed', cause: failed.map(([, v]) => (v as { cause: string }).cause).join('; ') };
    const pending = verdicts.filter(([, v]) => v.kind === 'pending');
    if (pending.length)
      return { kind: 'pending', detail: pending.map(([, v]) => (v as { detail: string }).detail).join('; ') };
    return {
      kind: 'ready',
      urls: Object.fromEntries(event.apps.map((app) => [app, publicUrl(name, app, this.opts.domain)])),
    };
  }

  private async checkApp(target: RuntimeTarget, ns: string, app: string): Promise<AppVerdict> {
    const gen = target.generation;
    const name = objectName(app);
    const deployment = await this.readOrNull('deployments', ns, name);
    if (!deployment)
      return { kind: 'failed', cause: `app ${app}: not deployed (no Deployment ${ns}/${name})` };
    const current = generationOf(deployment);
    if (current > gen) return { kind: 'superseded', cause: `generation ${current} rolled ${app} since` };
    const state = rolloutState(deployment);
    if (state.state === 'ready') return { kind: 'ready' };
    const rollout = deployment.spec?.template?.metadata?.labels?.[LABELS.rollout];
    const selector = `${LABELS.app}=${app}${rollout ? `,${LABELS.rollout}=${rollout}` : ''}`;
    const pods = await this.call(`list pods of ${ns}/${name}`, (k) => k.pods.list(ns, selector));
    const failure = pods.map(podFailure).find((f) => f !== undefined);
    if (failure)
      return {
        kind: 'failed',
        cause: await this.failureCause(target, ns, app, failure, failure.pod, failure.ran),
      };
    if (state.state === 'failed') {
      const pod = newest(pods);
      const podName = pod?.metadata?.name;
      const message = `${state.message}${pod ? ` (pod ${podName}: ${podSummary(pod)})` : ''}`;
      return {
        kind: 'failed',
        cause: await this.failureCause(target, ns, app, { reason: state.reason, message }, podName, false),
      };
    }
    return { kind: 'pending', detail: `${app}: ${state.detail}` };
  }

  /**
   * `app web: CrashLoopBackOff (back-off …); last log lines: … | …`, with the app's secret values masked
   * (read from its Secret: the event carries none). Logs are left out when the Secret can't be read.
   */
  private async failureCause(
    target: RuntimeTarget,
    ns: string,
    app: string,
    { reason, message }: { reason: string; message: string },
    pod: string | undefined,
    previous: boolean,
  ): Promise<string> {
    let logs = '';
    let secrets: string[] | undefined;
    try {
      const secret = await this.readOrNull('secrets', ns, objectName(app));
      secrets = Object.values(secret?.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8'));
    } catch {
      secrets = undefined;
    }
    if (pod && secrets) {
      const read = (prev: boolean) =>
        this.call(`read the log of ${ns}/${pod}`, (k) =>
          k.podLog(ns, pod, { tailLines: CAUSE_SEARCH_LINES, previous: prev }),
        );
      logs = await read(previous)
        .catch(() => (previous ? read(false) : ''))
        .catch(() => '');
    }
    const output = maskSecrets(String(logs ?? ''), secrets ?? []);
    const lines = output
      .split(/\r?\n/)
      .filter((l) => l.trim())
      .slice(-LOG_TAIL_LINES)
      .join(' | ');
    const tail = lines.length > LOG_TAIL_CHARS ? `…${lines.slice(-LOG_TAIL_CHARS)}` : lines;
    const withheld =
      pod && !secrets ? '; logs withheld (the secret bundle to mask them could not be read)' : '';
    const what = `app ${app}: ${reason}${message ? ` (${message})` : ''}`;
    const where = { target, app, source: 'app' as const };
    // Logs read: lead with the cause they name (else their last lines); withheld: say so.
    const text =
      pod && secrets
        ? failureMessage(what, output, tail, where).replace('; last output: (no output)', '')
        : `${what}${withheld}`;
    return maskSecrets(text, secrets ?? []);
  }

  /**
   * The app's pods' output: a section per pod of the app (oldest first, so the newest ends the text),
   * headed `--- pod <name> (<state>) ---`, each its container's last `tailLines` lines; a pod whose
   * container waits to restart shows its previous run's. Masked with the values of the app's Secret (the
   * bundle it runs with). undefined when the environment or the app has no pods.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    if (query.source !== 'app') return undefined;
    const ns = namespaceName(target);
    const pods = await this.call(`list pods of ${ns}/${app}`, (k) =>
      k.pods.list(ns, `${LABELS.app}=${app}`),
    ).catch((err) => {
      if (isCode(err, 404)) return [];
      throw err;
    });
    if (pods.length === 0) return undefined;
    const secret = await this.readOrNull('secrets', ns, objectName(app));
    const secrets = Object.values(secret?.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8'));
    const t = (p: (typeof pods)[number]) => new Date(p.metadata?.creationTimestamp ?? 0).getTime();
    const sorted = [...pods].sort((a, b) => t(a) - t(b));
    const limitBytes = Math.max(1024, Math.floor(query.maxBytes / sorted.length));
    let truncated = false;
    const sections: string[] = [];
    for (const pod of sorted) {
      const name = pod.metadata?.name ?? '?';
      const status = pod.status?.containerStatuses?.find((c) => c.name === 'app');
      const previous = !status?.state?.running && (status?.restartCount ?? 0) > 0;
      const read = (tailLines: number) =>
        this.call(`read the log of ${ns}/${name}`, (k) =>
          k.podLog(ns, name, { tailLines, limitBytes, previous }),
        );
      let text = '';
      try {
        // limitBytes keeps the first bytes of the tail asked for: while the answer hits it, the newest
        // lines may be missing, so ask for fewer lines (halving) until it fits.
        for (let tail = query.tailLines; ; tail = Math.floor(tail / 2)) {
          text = String((await read(tail)) ?? '');
          if (Buffer.byteLength(text) < limitBytes) break;
          truncated = true;
          if (tail <= 1) break;
        }
      } catch (err) {
        // A container that has not started has no log yet (400): its section is empty.
        if (!(err instanceof KubeError) || err.code !== 400) throw err;
        text = '';
      }
      const lines = text.split('\n');
      if (lines.at(-1) === '') lines.pop();
      if (lines.length >= query.tailLines) truncated = true;
      const state = `${podSummary(pod)}${previous ? "; the previous container's log" : ''}`;
      sections.push(`--- pod ${name} (${state}) ---\n${lines.length ? `${lines.join('\n')}\n` : ''}`);
    }
    return { text: maskSecrets(sections.join(''), secrets), truncated };
  }

  // ---- plumbing --------------------------------------------------------------------------------------

  /** The cluster's clients, once per container: endpoint and CA from `eks:DescribeCluster`. */
  private clients(): Promise<Kube> {
    this.kube ??= (async () => {
      const out = await this.eks.send(new DescribeClusterCommand({ name: this.opts.clusterName }));
      const c = out.cluster;
      if (!c?.endpoint || !c.certificateAuthority?.data)
        throw new DeployFailed(
          `EKS cluster ${this.opts.clusterName} has no endpoint or CA yet (status ${c?.status ?? 'unknown'})`,
        );
      return connect({
        server: c.endpoint,
        caData: c.certificateAuthority.data,
        token: () => this.tokens.get(),
      });
    })().catch((err) => {
      this.kube = undefined;
      throw err;
    });
    return this.kube;
  }

  /** One API call, as `op` in errors; a 401 (an expired token) is retried once with a fresh token. */
  private async call<T>(op: string, fn: (k: Kube) => Promise<T>): Promise<T> {
    const kube = await this.clients();
    try {
      return await fn(kube);
    } catch (err) {
      const e = KubeError.from(op, err);
      if (e.code !== 401) throw e;
      this.tokens.invalidate();
      try {
        return await fn(kube);
      } catch (again) {
        throw KubeError.from(op, again);
      }
    }
  }

  private async readOrNull<K extends Kind>(kind: K, ns: string, name: string): Promise<ObjOf<K> | undefined> {
    try {
      return await this.call(`read ${kind} ${ns ? `${ns}/` : ''}${name}`, (k) =>
        (k[kind] as unknown as Resource<ObjOf<K>>).read(ns, name),
      );
    } catch (err) {
      if (isCode(err, 404)) return undefined;
      throw err;
    }
  }

  /** A thrown error as one of the step errors, its message masked. */
  private async explain(err: unknown, target: RuntimeTarget, secrets: string[]): Promise<Error> {
    if (err instanceof Superseded || err instanceof DeployFailed || err instanceof TransientError) return err;
    if (err instanceof ConfigError) return err;
    const mask = (s: string) => maskSecrets(s, secrets);
    if (err instanceof KubeError) {
      const namespaceGone =
        (err.code === 403 && /being terminated/.test(err.detail)) ||
        (err.code === 404 && /^namespaces? "[^"]*" not found/.test(err.detail));
      if (namespaceGone) {
        const fence = await this.fenceGeneration(namespaceName(target)).catch(() => 0);
        if (fence >= target.generation)
          return new Superseded(`a teardown (generation ${fence}) removed the environment`);
        return new TransientError(mask(err.message));
      }
      if (err.code === 0 || err.code === 401 || err.code === 409 || err.code === 429 || err.code >= 500)
        return new TransientError(mask(err.message));
      return new DeployFailed(`the cluster refused to ${mask(err.message)}`);
    }
    const aws = err as { name?: string; message?: string; $retryable?: unknown; $metadata?: unknown };
    if (aws?.$metadata !== undefined) {
      if (aws.name === 'ResourceNotFoundException')
        return new DeployFailed(`EKS cluster ${this.opts.clusterName} not found in ${this.opts.region}`);
      if (aws.name === 'AccessDeniedException' || aws.name === 'UnauthorizedException')
        return new DeployFailed(
          `not allowed to describe EKS cluster ${this.opts.clusterName}: ${aws.message}`,
        );
      return new TransientError(`eks:DescribeCluster failed: ${aws.name}: ${aws.message}`);
    }
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** A namespace of that name that this service did not create is never written to nor deleted. */
function refuseForeign(ns: V1Namespace): void {
  if (ns.metadata?.labels?.[LABELS.managedBy] !== MANAGED_BY)
    throw new DeployFailed(
      `namespace ${ns.metadata?.name} exists but is not managed by ${MANAGED_BY} (no ${LABELS.managedBy}=${MANAGED_BY} label): refusing to touch it`,
    );
}

function superseded(what: string, current: number, gen: number): Superseded {
  return new Superseded(`${what} belongs to generation ${current}; this is ${gen}`);
}

/**
 * The EKS cluster as configured by environment variables, until shared/config.ts carries them:
 * `EKS_CLUSTER_NAME`, `AWS_REGION`, `EKS_INGRESS_CLASS`, `EKS_INGRESS_DOMAIN` (required);
 * `ROLLOUT_WATCHER_FUNCTION` (needed by whoever calls awaitReady; `deps.watcherFunction` wins),
 * `EKS_INGRESS_NAMESPACE`, `EKS_INGRESS_ANNOTATIONS` (JSON object), `EKS_TLS_SECRET_NAME`,
 * `EKS_ALLOW_FROM_CIDRS` (comma-separated), `EKS_SYSTEM_NAMESPACE` (optional).
 */
export function eksClusterFromEnv(
  deps: Pick<EksClusterOptions, 'complete' | 'heartbeat' | 'invokeWatcher' | 'watcherFunction'>,
  env: NodeJS.ProcessEnv = process.env,
): EksCluster {
  const need = (name: string) => {
    const v = env[name];
    if (!v) throw new ConfigError(`${name} is not set: the stack sets it on every function that needs it`);
    return v;
  };
  let annotations: Record<string, string> | undefined;
  if (env.EKS_INGRESS_ANNOTATIONS) {
    try {
      annotations = JSON.parse(env.EKS_INGRESS_ANNOTATIONS) as Record<string, string>;
    } catch {
      throw new ConfigError('EKS_INGRESS_ANNOTATIONS must be a JSON object of strings');
    }
  }
  return new EksCluster({
    ...deps,
    watcherFunction: deps.watcherFunction || env.ROLLOUT_WATCHER_FUNCTION || undefined,
    clusterName: need('EKS_CLUSTER_NAME'),
    region: need('AWS_REGION'),
    ingressClassName: need('EKS_INGRESS_CLASS'),
    domain: need('EKS_INGRESS_DOMAIN'),
    ingressNamespace: env.EKS_INGRESS_NAMESPACE || undefined,
    ingressAnnotations: annotations,
    tlsSecretName: env.EKS_TLS_SECRET_NAME || undefined,
    allowFromCidrs: env.EKS_ALLOW_FROM_CIDRS?.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    systemNamespace: env.EKS_SYSTEM_NAMESPACE || undefined,
  });
}
