/**
 * The EKS cluster adapter's core (eks/cluster.ts has the whole story): the connection to the cluster's API (its
 * endpoint and CA from the stack, an STS-presigned token), the fenced teardown, and the options. What the
 * TearDown step runs (`EksClusterCore`), so its bundle leaves the deploy, the rollout watch, the pod logs and
 * the Lambda invoker out; `EksCluster` (eks/cluster.ts) extends it with those.
 */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { V1ConfigMap, V1Namespace } from '@kubernetes/client-node';
import { type Config, config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { DeployFailed, Superseded, TransientError } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { RuntimeTarget } from '../port.js';
import { type CredentialProvider, EksTokens } from './auth.js';
import { connect, isCode, type Kube, KubeError, type Resource } from './client.js';
import type { KedaOptions } from './front-door.js';
import {
  ANNOTATIONS,
  appSelector,
  fenceName,
  fenceObject,
  generationOf,
  LABELS,
  MANAGED_BY,
  namespaceName,
  type ObjectOptions,
  publicUrl,
} from './objects.js';

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

export interface EksClusterOptions extends ObjectOptions {
  clusterName: string;
  /** Where KEDA's HTTP add-on runs (front-door.ts `KEDA_DEFAULTS`: its chart's defaults). */
  keda?: KedaOptions;
  /**
   * The access verifier's URL (ACCESS_VERIFIER_URL; the stack's verifier function URL): a protected app's
   * Ingress asks it about every visitor. Unset: no auth annotations (a warning per deploy of a protected one).
   */
  verifierUrl?: string;
  region: string;
  /**
   * Ends a callback task (`Workflows.completeTask`): what the watcher (`watch`) completes the deploy's
   * task with. Only the watcher needs it; deploy, teardown and logs complete nothing.
   */
  complete?: (token: string, outcome: TaskOutcome) => Promise<void>;
  /**
   * Sends a task heartbeat (`Workflows.heartbeat`), at the start of every watcher invocation and every
   * `heartbeatMs`. Answering 'gone' (the task no longer waits) stops the watcher. Without it the watcher
   * sends none, so the waiting state must then have no HeartbeatSeconds.
   */
  heartbeat?: (token: string) => Promise<undefined | 'gone'>;
  /**
   * Starts a watcher invocation asynchronously. Default: Lambda `Invoke` (InvocationType `Event`) of
   * `watcherFunction` through `lambda` (eks/lambda-invoke.ts). Tests run the watcher in-process instead.
   */
  invokeWatcher?: (event: RolloutWatchEvent) => Promise<void>;
  /** The watcher Lambda's name or ARN (default: `ROLLOUT_WATCHER_FUNCTION`). */
  watcherFunction?: string;
  /**
   * The cluster's Kubernetes API: its endpoint (`https://…`) and CA (base64 of its PEM), as
   * `eks:DescribeCluster` gives them; the stack resolves them at deploy time (EKS_CLUSTER_ENDPOINT,
   * EKS_CLUSTER_CA_DATA). Or a function that looks them up on first use (the CLI: `describeCluster` of
   * eks/describe.ts). Missing, the first cluster call throws a ConfigError naming the variables.
   */
  api?: ClusterApi | (() => Promise<ClusterApi>);
  /**
   * The Lambda client the watcher invocations go through (the registry passes the container's,
   * registry/aws-clients.ts `lambdaClient()`). Needed only by a cluster that starts the watcher without
   * `invokeWatcher`.
   */
  lambda?: LambdaClient;
  /**
   * What signs the cluster tokens. Default: the SDK's default credential chain (in a Lambda bundle, the
   * function's environment credentials: lib/cdk/bundling.ts).
   */
  credentials?: CredentialProvider;
  stsHost?: string;
  /** Where teardown fences live (created on first use). Default `preview-system`. */
  systemNamespace?: string;
  timing?: Partial<EksTiming>;
}

/** Where a cluster's Kubernetes API answers: `eks:DescribeCluster`'s endpoint and CA data. */
export interface ClusterApi {
  endpoint: string;
  caData: string;
}

export type Kind = Exclude<keyof Kube, 'podLog'>;
export type ObjOf<K extends Kind> = Kube[K] extends Resource<infer T> ? T : never;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
export const terminating = (ns: V1Namespace | undefined) =>
  ns !== undefined && (ns.metadata?.deletionTimestamp !== undefined || ns.status?.phase === 'Terminating');

/** The cluster connection and the fenced teardown (see eks/cluster.ts); `EksCluster` adds deploy, readiness, logs. */
export class EksClusterCore {
  readonly timing: EksTiming;
  protected readonly credentials: CredentialProvider;
  protected readonly tokens: EksTokens;
  protected kube?: Promise<Kube>;
  protected readonly systemNamespace: string;

  constructor(protected readonly opts: EksClusterOptions) {
    this.timing = { ...TIMING_DEFAULTS, ...opts.timing };
    this.credentials = opts.credentials ?? defaultProvider();
    this.systemNamespace = opts.systemNamespace ?? 'preview-system';
    this.tokens = new EksTokens({
      clusterName: opts.clusterName,
      region: opts.region,
      stsHost: opts.stsHost,
      credentials: this.credentials,
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
            await this.annotateGeneration(ns, gen);
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

  /**
   * Stop the environment's apps (a failed environment keeps nothing running): delete their Deployments,
   * fenced like every write (one a newer generation wrote is Superseded), keeping their Services,
   * Ingresses and Secrets; the next deploy or restart creates them again (`applyApp`). No namespace (or
   * one being removed): nothing runs, nothing to stop.
   */
  async stopApps(target: RuntimeTarget, reason: string): Promise<Record<string, string>> {
    const name = namespaceName(target);
    const gen = target.generation;
    const stopped: Record<string, string> = {};
    try {
      const ns = await this.readOrNull('namespaces', '', name);
      if (!ns || terminating(ns)) return stopped;
      refuseForeign(ns);
      if (generationOf(ns) > gen) throw superseded(name, generationOf(ns), gen);
      const items = await this.call(`list deployments in ${name}`, (k) =>
        k.deployments.list(name, appSelector),
      );
      for (const item of items) {
        const app = item.metadata?.labels?.[LABELS.app];
        const object = item.metadata?.name;
        if (!app || !object) continue;
        const current = generationOf(item);
        if (current > gen) throw superseded(`${name}/${object}`, current, gen);
        try {
          await this.call(`delete deployments ${name}/${object}`, (k) =>
            k.deployments.remove(name, object, { resourceVersion: item.metadata?.resourceVersion }),
          );
        } catch (err) {
          if (!isCode(err, 404)) throw err;
        }
        stopped[app] = `stopped: ${reason}`;
      }
    } catch (err) {
      throw await this.explain(err, target, []);
    }
    log.info('apps stopped', { namespace: name, generation: gen, apps: Object.keys(stopped).join(',') });
    return stopped;
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
        // Removed since it was read (a newer generation re-created the namespace, or the sweep): anew.
        if (isCode(err, 404) && existing) continue;
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

  /**
   * Remove the teardown fences nothing needs any more (`Runtime.pruneFences`): a fence whose namespace is
   * gone and that was written before `before` (the caller's cutoff: older than any call of a generation it
   * fences can arrive, core/expiry.ts `FENCE_RETENTION_MS`). A namespace that exists is left with its
   * fence (a teardown may be deleting it; a newer generation that re-created it removes the fence itself,
   * eks/cluster.ts `ensureNamespace`). Each delete requires the fence's resourceVersion as read, so a
   * teardown that rewrote it meanwhile keeps it. No system namespace yet: nothing to remove.
   */
  async pruneFences(before: Date): Promise<{ removed: number }> {
    const sys = this.systemNamespace;
    let removed = 0;
    try {
      const fences = await this.call(`list ConfigMaps ${sys}`, (k) =>
        k.configMaps.list(sys, `${LABELS.managedBy}=${MANAGED_BY}`),
      );
      for (const fence of fences) {
        const name = fence.metadata?.name ?? '';
        if (!name.startsWith(fenceName(''))) continue;
        const written = Date.parse(fence.data?.tornDownAt ?? String(fence.metadata?.creationTimestamp ?? ''));
        if (Number.isNaN(written) || written >= before.getTime()) continue;
        const namespace = fence.data?.namespace ?? name.slice(fenceName('').length);
        if (await this.readOrNull('namespaces', '', namespace)) continue;
        if (await this.removeFence(fence)) removed++;
      }
    } catch (err) {
      // No system namespace: no fence was ever written.
      if (isCode(err, 404)) return { removed };
      throw err;
    }
    if (removed > 0) log.info('teardown fences removed', { removed, before: before.toISOString() });
    return { removed };
  }

  /** Delete a fence if it is still the one read (its resourceVersion); false when it changed or went. */
  protected async removeFence(fence: V1ConfigMap): Promise<boolean> {
    const sys = this.systemNamespace;
    const name = fence.metadata?.name ?? '';
    try {
      await this.call(`delete ConfigMap ${sys}/${name}`, (k) =>
        k.configMaps.remove(sys, name, { resourceVersion: fence.metadata?.resourceVersion }),
      );
      return true;
    } catch (err) {
      // 409: rewritten by a newer teardown since it was read; 404: already gone.
      if (isCode(err, 409) || isCode(err, 404)) return false;
      throw err;
    }
  }

  /** Mark `ns` as at generation `gen`, if nobody changed it since it was read (409 otherwise). */
  protected async annotateGeneration(ns: V1Namespace, gen: number): Promise<void> {
    const name = ns.metadata?.name ?? '';
    await this.call(`annotate Namespace ${name}`, (k) =>
      k.namespaces.patch('', name, {
        metadata: {
          resourceVersion: ns.metadata?.resourceVersion,
          annotations: { [ANNOTATIONS.generation]: String(gen) },
        },
      }),
    );
  }

  /** The generation of the teardown that last removed this namespace (0: never torn down). */
  protected async fenceGeneration(namespace: string): Promise<number> {
    return generationOf(await this.fence(namespace));
  }

  /** The teardown fence of this namespace, if any. */
  protected fence(namespace: string): Promise<V1ConfigMap | undefined> {
    return this.readOrNull('configMaps', this.systemNamespace, fenceName(namespace));
  }

  // ---- plumbing --------------------------------------------------------------------------------------

  /** The cluster's clients, once per container: its endpoint and CA (`api`), the cached token. */
  protected clients(): Promise<Kube> {
    this.kube ??= (async () => {
      const given = this.opts.api;
      if (!given)
        throw new ConfigError(
          `EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are not set: the stack resolves them (eks:DescribeCluster of ${this.opts.clusterName}) for every function that calls the cluster`,
        );
      const api = typeof given === 'function' ? await given() : given;
      return connect({ server: api.endpoint, caData: api.caData, token: () => this.tokens.get() });
    })().catch((err) => {
      this.kube = undefined;
      throw err;
    });
    return this.kube;
  }

  /** One API call, as `op` in errors; a 401 (an expired token) is retried once with a fresh token. */
  protected async call<T>(op: string, fn: (k: Kube) => Promise<T>): Promise<T> {
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

  protected async readOrNull<K extends Kind>(
    kind: K,
    ns: string,
    name: string,
  ): Promise<ObjOf<K> | undefined> {
    try {
      return await this.call(`read ${kind} ${ns ? `${ns}/` : ''}${name}`, (k) =>
        (k[kind] as unknown as Resource<ObjOf<K>>).read(ns, name),
      );
    } catch (err) {
      if (isCode(err, 404)) return undefined;
      throw err;
    }
  }

  /** Delete one object (at `resourceVersion` when given); already gone is fine. */
  protected async removeObject(
    kind: Kind,
    ns: string,
    name: string,
    resourceVersion?: string,
  ): Promise<void> {
    try {
      await this.call(`delete ${kind} ${ns}/${name}`, (k) =>
        (k[kind] as unknown as Resource<ObjOf<typeof kind>>).remove(
          ns,
          name,
          resourceVersion ? { resourceVersion } : {},
        ),
      );
    } catch (err) {
      if (!isCode(err, 404)) throw err;
    }
  }

  /** A thrown error as one of the step errors, its message masked. */
  protected async explain(err: unknown, target: RuntimeTarget, secrets: string[]): Promise<Error> {
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
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** A namespace of that name that this service did not create is never written to nor deleted. */
export function refuseForeign(ns: V1Namespace): void {
  if (ns.metadata?.labels?.[LABELS.managedBy] !== MANAGED_BY)
    throw new DeployFailed(
      `namespace ${ns.metadata?.name} exists but is not managed by ${MANAGED_BY} (no ${LABELS.managedBy}=${MANAGED_BY} label): refusing to touch it`,
    );
}

export function superseded(what: string, current: number, gen: number): Superseded {
  return new Superseded(`${what} belongs to generation ${current}; this is ${gen}`);
}

/** What `eksClusterOptions` takes besides the configuration: task callbacks, the watcher, the clients. */
export type EksClusterDeps = Pick<
  EksClusterOptions,
  'complete' | 'heartbeat' | 'invokeWatcher' | 'watcherFunction' | 'api' | 'lambda'
>;

/**
 * The EKS cluster's options from the configuration (shared/config.ts, validated once per container:
 * `EKS_*`, `AWS_REGION`, `ROLLOUT_WATCHER_FUNCTION`). The cluster's name, ingress class and domain are
 * required here, by whoever uses the cluster. Without the cluster's API (`EKS_CLUSTER_ENDPOINT` and
 * `EKS_CLUSTER_CA_DATA`, set by the stack on the functions that call it) `deps.api` looks it up, or the
 * first cluster call throws a ConfigError; `deps.watcherFunction` wins over the configured one.
 */
export function eksClusterOptions(
  deps: EksClusterDeps,
  settings: Pick<Config, 'region' | 'eks'> = config(),
): EksClusterOptions {
  const { eks } = settings;
  const need = <T>(value: T | undefined, name: string): T => {
    if (!value)
      throw new ConfigError(`${name} is not set: the stack sets it on every function that needs it`);
    return value;
  };
  return {
    ...deps,
    api: eks.api ?? deps.api,
    watcherFunction: deps.watcherFunction || eks.watcherFunction || undefined,
    clusterName: need(eks.clusterName, 'EKS_CLUSTER_NAME'),
    region: settings.region,
    ingressClassName: need(eks.ingressClassName, 'EKS_INGRESS_CLASS'),
    domain: need(eks.domain, 'EKS_INGRESS_DOMAIN'),
    ingressNamespace: eks.ingressNamespace,
    ingressAnnotations: eks.ingressAnnotations,
    tlsSecretName: eks.tlsSecretName,
    allowFromCidrs: eks.allowFromCidrs,
    systemNamespace: eks.systemNamespace,
    verifierUrl: eks.verifierUrl,
  };
}
