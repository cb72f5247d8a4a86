/**
 * The EKS cluster half of the cloud runtime (`Cluster` of cloud.ts): a namespace per environment on the
 * customer's EKS cluster, each app an image in a Deployment behind a Service and an https Ingress. The
 * connection and the teardown are `EksClusterCore` (eks/core.ts), which the TearDown step uses alone;
 * `EksCluster` adds the deploy, the readiness watch and the logs. The
 * objects are eks/objects.ts; the API calls go through the real `@kubernetes/client-node` (eks/client.ts),
 * reached at the cluster's endpoint with its CA, which the stack resolved at deploy time (its
 * `eks:DescribeCluster`, as EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA: no function bundles the EKS
 * client), and an STS-presigned bearer token (eks/auth.ts).
 *
 * **Fencing by generation.** The namespace's `preview-control-plane/generation` annotation is the
 * environment's fence: a call of an older generation changes nothing and throws `Superseded`; a newer one
 * bumps it (a compare-and-set on the namespace's resourceVersion). Every object carries the generation
 * that wrote it too, and is written with optimistic concurrency, so of two deploys racing, the older never
 * overwrites what the newer wrote. A teardown leaves a fence behind the namespace it deletes (a ConfigMap in
 * `systemNamespace`, eks/objects.ts `fenceObject`), so a late call of an older generation can't re-create
 * it either. A fence goes once nothing needs it: when a newer generation creates the namespace again (its
 * annotation fences from then on), or, its namespace gone, when the expiry sweep finds it older than any
 * call it fences can be (`pruneFences`; core/expiry.ts `FENCE_RETENTION_MS`).
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
import { type Config, config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { log } from '../../../shared/log.js';
import { Superseded, TransientError } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { type AppAddress, resolveAppRefs } from '../app-refs.js';
import type { Cluster } from '../cloud.js';
import type { AppLaunch, AppSpec, DeployOptions, FrontDoorSettings, RuntimeTarget } from '../port.js';
import { isCode, type Kube, KubeError, type Resource } from './client.js';
import {
  type EksClusterDeps,
  eksClusterOptions,
  type Kind,
  type ObjOf,
  type RolloutWatchEvent,
  refuseForeign,
  sleep,
  superseded,
  terminating,
  type WatchOutcome,
} from './core.js';
import {
  accessIngressName,
  accessIngressObject,
  INTERCEPTOR_SERVICE,
  interceptorServiceObject,
  KEDA_DEFAULTS,
  scaledObject,
  sleeps,
  VERIFIER_SERVICE,
  verifierServiceObject,
  withFrontDoor,
} from './front-door.js';
import { LambdaInvoker } from './lambda-invoke.js';
import { EksClusterLogs } from './logs.js';
import {
  ANNOTATIONS,
  appSelector,
  deploymentObject,
  generationOf,
  ingressObject,
  internalUrl,
  LABELS,
  NETWORK_POLICY_NAME,
  namespaceName,
  namespaceObject,
  networkPolicyObject,
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
} from './objects.js';
import { newest, podFailure, podSummary, rolloutState } from './rollout.js';

export {
  type ClusterApi,
  EksClusterCore,
  type EksClusterOptions,
  type EksTiming,
  eksClusterOptions,
  type RolloutWatchEvent,
  TIMING_DEFAULTS,
  type WatchOutcome,
} from './core.js';

export { EksClusterLogs } from './logs.js';
export { internalUrl, namespaceName, publicUrl } from './objects.js';

/** A watcher stops this long before its invocation's time runs out, to hand over in time. */
const SLICE_MARGIN_MS = 15_000;

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

export class EksCluster extends EksClusterLogs implements Cluster {
  private lambda?: LambdaInvoker;

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
      const door = opts.frontDoor;
      const keda = sleeps(door) ? [this.opts.keda?.namespace ?? KEDA_DEFAULTS.namespace] : [];
      await this.apply('networkPolicies', ns, NETWORK_POLICY_NAME, gen, () =>
        networkPolicyObject(ns, gen, this.opts, keda),
      );
      if (door?.access === 'protected' && !this.opts.verifierUrl)
        log.warn('protected apps without a verifier: ACCESS_VERIFIER_URL is not set, they answer anyone', {
          namespace: ns,
        });
      if (sleeps(door))
        await this.apply('services', ns, INTERCEPTOR_SERVICE, gen, () =>
          interceptorServiceObject(ns, gen, this.opts.keda),
        );
      const verifierUrl = this.opts.verifierUrl;
      if (door?.access === 'protected' && verifierUrl)
        await this.apply('services', ns, VERIFIER_SERVICE, gen, () =>
          verifierServiceObject(ns, gen, verifierUrl),
        );
      await Promise.all(
        apps.map(async (app) => {
          const secretVersion = await this.syncSecret(ns, app, gen);
          // A restart of an app with no Deployment yet creates it whole.
          if (opts.restart && (await this.restartApp(ns, app, gen, secretVersion))) return;
          await this.applyApp(ns, app, gen, secretVersion, target, door);
        }),
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
          await this.annotateGeneration(ns, gen);
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
      const latest = await this.fence(name);
      const after = generationOf(latest);
      if (after >= gen) {
        await this.call(`delete Namespace ${name}`, (k) =>
          k.namespaces.remove('', name, { propagationPolicy: 'Foreground' }),
        ).catch(() => undefined);
        throw new Superseded(`${name} was torn down at generation ${after}; this is ${gen}`);
      }
      // The namespace fences older generations from now on (its annotation, and the next teardown's
      // fence): an older teardown's fence is stale. Removed only as read (a teardown rewriting it wins);
      // left for the expiry sweep when that fails.
      if (latest)
        await this.removeFence(latest).catch((err) =>
          log.warn('stale teardown fence left for the sweep', {
            namespace: name,
            error: (err as Error).message,
          }),
        );
      return;
    }
  }

  /** Write the app's Secret (what every deploy and restart does first); returns its version. */
  private async syncSecret(ns: string, app: AppLaunch, gen: number): Promise<string> {
    const secret = await this.apply('secrets', ns, objectName(app.name), gen, (existing) =>
      secretObject(ns, app, gen, existing),
    );
    return secretVersionOf(secret);
  }

  /** Write the app's Deployment (at `secretVersion`, its Secret's), Service, Ingress and scaler. */
  private async applyApp(
    ns: string,
    app: AppLaunch,
    gen: number,
    secretVersion: string,
    target: RuntimeTarget,
    door: FrontDoorSettings | undefined,
  ): Promise<void> {
    const name = objectName(app.name);
    await this.apply('deployments', ns, name, gen, (existing) =>
      deploymentObject(ns, app, secretVersion, gen, this.opts, existing),
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
    // Sleeping: the HTTPScaledObject before the Ingress routes to the interceptor; no longer sleeping:
    // the Ingress back to the Service, then the HTTPScaledObject goes (KEDA leaves the replicas as they are).
    if (sleeps(door))
      await this.apply('httpScaledObjects', ns, name, gen, () =>
        scaledObject(ns, app, gen, this.opts, door!),
      );
    await this.apply('ingresses', ns, name, gen, () =>
      withFrontDoor(ingressObject(ns, app, gen, this.opts), gen, target, this.opts, door),
    );
    // A protected app's link path goes to the verifier (it sets the cookie); unprotected, that Ingress goes.
    const access = accessIngressName(app.name);
    const verifierUrl = this.opts.verifierUrl;
    if (door?.access === 'protected' && verifierUrl)
      await this.apply('ingresses', ns, access, gen, () =>
        accessIngressObject(ns, app, gen, target, { ...this.opts, verifierUrl }, door),
      );
    else if (door && (await this.readOrNull('ingresses', ns, access)))
      await this.removeObject('ingresses', ns, access);
    if (door && !sleeps(door) && (await this.readOrNull('httpScaledObjects', ns, name)))
      await this.removeObject('httpScaledObjects', ns, name);
  }

  /**
   * Roll the app's pods (its Secret synced, at `secretVersion`): a merge patch of its pod template,
   * nothing else. @returns false when the app has no Deployment to restart (the caller applies it whole)
   */
  private async restartApp(ns: string, app: AppLaunch, gen: number, secretVersion: string): Promise<boolean> {
    const name = objectName(app.name);
    for (let attempt = 0; attempt < 5; attempt++) {
      const deployment = await this.readOrNull('deployments', ns, name);
      if (!deployment) return false;
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
                    [ANNOTATIONS.secretVersion]: secretVersion,
                  },
                },
              },
            },
          }),
        );
        return true;
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
    }
    throw new TransientError(`Deployment ${ns}/${name} kept changing under this restart`);
  }

  /** Delete the objects of apps not in `keep` (Ingress, Service, Deployment, Secret, in that order). */
  private async prune(ns: string, keep: Set<string>, gen: number): Promise<void> {
    for (const kind of ['ingresses', 'httpScaledObjects', 'services', 'deployments', 'secrets'] as const) {
      const items = await this.call(`list ${kind} in ${ns}`, (k) => k[kind].list(ns, appSelector));
      for (const item of items) {
        const app = item.metadata?.labels?.[LABELS.app];
        const name = item.metadata?.name;
        if (!app || !name || keep.has(app)) continue;
        const current = generationOf(item);
        if (current > gen) throw superseded(`${ns}/${name}`, current, gen);
        await this.removeObject(kind, ns, name, item.metadata?.resourceVersion);
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
    if (!this.opts.lambda)
      throw new ConfigError('this EKS cluster adapter has no Lambda client to start the rollout watcher');
    this.lambda ??= new LambdaInvoker(this.opts.lambda);
    await this.lambda.invokeAsync(fn, event);
  }

  /** Ends a task (the watcher's): `complete` is required of a cluster that watches. */
  private async completeTask(token: string, outcome: TaskOutcome): Promise<void> {
    if (!this.opts.complete)
      throw new ConfigError('this EKS cluster adapter completes no tasks (no `complete`)');
    await this.opts.complete(token, outcome);
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
        await this.completeTask(event.token, {
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
    await this.completeTask(event.token, outcome);
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
}

/** The EKS cluster as configured (`eksClusterOptions` of eks/core.ts: shared/config.ts, EKS_*). */
export function eksClusterOf(
  deps: EksClusterDeps,
  settings: Pick<Config, 'region' | 'eks'> = config(),
): EksCluster {
  return new EksCluster(eksClusterOptions(deps, settings));
}
