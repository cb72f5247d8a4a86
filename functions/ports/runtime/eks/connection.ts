/**
 * One connection to the EKS cluster's Kubernetes API, which every part of the EKS adapter is given (eks/
 * cluster.ts tells the whole story): the cluster's endpoint and CA (from the stack, or looked up), an
 * STS-presigned bearer token (eks/auth.ts), cached and renewed after a 401, the client of eks/client.ts,
 * made once, and the options: where apps are reached (eks/objects.ts `ObjectOptions`), the front door's
 * engines, the timing. The parts (`EksApps`, `EksRolloutWatch`, `EksTeardown`, `EksLogs`) each take one, so a
 * handler that needs only one part bundles only that part and this file.
 */
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { V1Namespace } from '@kubernetes/client-node';
import { type Config, config } from '../../../shared/config.js';
import { ConfigError } from '../../../shared/errors.js';
import { DeployFailed } from '../../../shared/step-errors.js';
import { type CredentialProvider, EksTokens } from './auth.js';
import { connect, isCode, type Kube, KubeError, type Resource } from './client.js';
import { engineOf } from './engines.js';
import type { ObjectOptions } from './objects.js';
import type { ServiceOptions } from './services/objects.js';

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

/** Where KEDA's HTTP add-on runs, where it differs from its chart's defaults (front-door.ts `KEDA_DEFAULTS`). */
export interface KedaOptions {
  namespace?: string;
  interceptorService?: string;
  interceptorPort?: number;
}

/** Where a cluster's Kubernetes API answers: `eks:DescribeCluster`'s endpoint and CA data. */
export interface ClusterApi {
  endpoint: string;
  caData: string;
}

/** What a connection to the cluster is made from: the cluster, how to reach and sign for it, its settings. */
export interface EksConnectionOptions extends ObjectOptions {
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
   * The cluster's Kubernetes API: its endpoint (`https://…`) and CA (base64 of its PEM), as
   * `eks:DescribeCluster` gives them; the stack resolves them at deploy time (EKS_CLUSTER_ENDPOINT,
   * EKS_CLUSTER_CA_DATA). Or a function that looks them up on first use (the CLI: `describeCluster` of
   * eks/describe.ts). Missing, the first cluster call throws a ConfigError naming the variables.
   */
  api?: ClusterApi | (() => Promise<ClusterApi>);
  /**
   * What signs the cluster tokens. Default: the SDK's default credential chain (in a Lambda bundle, the
   * function's environment credentials: lib/cdk/bundling.ts).
   */
  credentials?: CredentialProvider;
  stsHost?: string;
  /** Where teardown fences live (created on first use). Default `preview-system`. */
  systemNamespace?: string;
  /** preview.yaml services: the Postgres storage, the CloudNativePG operator's namespace. */
  services?: ServiceOptions;
  timing?: Partial<EksTiming>;
}

export type Kind = Exclude<keyof Kube, 'podLog'>;
export type ObjOf<K extends Kind> = Kube[K] extends Resource<infer T> ? T : never;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
export const terminating = (ns: V1Namespace | undefined) =>
  ns !== undefined && (ns.metadata?.deletionTimestamp !== undefined || ns.status?.phase === 'Terminating');

/**
 * The connection: made once per adapter (the composite `EksCluster`, or a registry getter's one part), its
 * client and token shared by every call through it.
 */
export class EksConnection {
  readonly timing: EksTiming;
  /** Where teardown fences live. */
  readonly systemNamespace: string;
  private readonly tokens: EksTokens;
  private kube?: Promise<Kube>;
  /** Custom kinds found installed (`requireKinds`). */
  private readonly installed = new Set<Kind>();

  constructor(readonly opts: EksConnectionOptions) {
    this.timing = { ...TIMING_DEFAULTS, ...opts.timing };
    this.systemNamespace = opts.systemNamespace ?? 'preview-system';
    this.tokens = new EksTokens({
      clusterName: opts.clusterName,
      region: opts.region,
      stsHost: opts.stsHost,
      credentials: opts.credentials ?? defaultProvider(),
    });
  }

  /** The cluster's clients, once per container: its endpoint and CA (`api`), the cached token. */
  private clients(): Promise<Kube> {
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
  async call<T>(op: string, fn: (k: Kube) => Promise<T>): Promise<T> {
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

  /** One object, or undefined when there is none (404). */
  async readOrNull<K extends Kind>(kind: K, ns: string, name: string): Promise<ObjOf<K> | undefined> {
    try {
      return await this.call(`read ${kind} ${ns ? `${ns}/` : ''}${name}`, (k) =>
        (k[kind] as unknown as Resource<ObjOf<K>>).read(ns, name),
      );
    } catch (err) {
      if (isCode(err, 404)) return undefined;
      throw err;
    }
  }

  /**
   * The objects of `kind` in `ns` matching `labelSelector`; none when the kind's engine is not installed
   * (eks/engines.ts: listing a custom kind whose CRD is missing answers 404, so nothing of it can exist).
   */
  async listOptional<K extends Kind>(kind: K, ns: string, labelSelector?: string): Promise<ObjOf<K>[]> {
    try {
      return await this.call(`list ${kind} in ${ns}`, (k) =>
        (k[kind] as unknown as Resource<ObjOf<K>>).list(ns, labelSelector),
      );
    } catch (err) {
      if (isCode(err, 404) && engineOf(kind)) return [];
      throw err;
    }
  }

  /**
   * Refuse a deploy that needs a kind whose engine the cluster lacks, before anything is written: a
   * DeployFailed naming the engine and how to install it. What was found installed is remembered for the
   * connection's life (an engine is not uninstalled under a running deploy; a missing one is asked again).
   */
  async requireKinds(kinds: Kind[], ns: string, why: string): Promise<void> {
    for (const kind of kinds) {
      const engine = engineOf(kind);
      if (!engine || this.installed.has(kind)) continue;
      try {
        await this.call(`list ${kind} in ${ns}`, (k) =>
          (k[kind] as unknown as Resource<ObjOf<typeof kind>>).list(ns),
        );
        this.installed.add(kind);
      } catch (err) {
        if (!isCode(err, 404)) throw err;
        throw new DeployFailed(
          `${why} needs ${engine.name}, which is not installed on the cluster (its ${kind} kind answers 404). Install it: ${engine.install}`,
        );
      }
    }
  }

  /** Delete one object (at `resourceVersion` when given); already gone is fine. */
  async removeObject(kind: Kind, ns: string, name: string, resourceVersion?: string): Promise<void> {
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
}

/**
 * The connection's options from the configuration (shared/config.ts, validated once per container:
 * `EKS_*`, `AWS_REGION`). The cluster's name and domain are required here, by whoever uses the cluster,
 * and the way in's: the Gateway's name and namespace (Gateway routing, the default) or the ingress class. Without the cluster's API (`EKS_CLUSTER_ENDPOINT` and `EKS_CLUSTER_CA_DATA`, set by
 * the stack on the functions that call it) `api` looks it up, or the first cluster call throws a
 * ConfigError.
 */
export function connectionOptions(
  settings: Pick<Config, 'region' | 'eks'> = config(),
  api?: EksConnectionOptions['api'],
): EksConnectionOptions {
  const { eks } = settings;
  const need = <T>(value: T | undefined, name: string): T => {
    if (!value)
      throw new ConfigError(`${name} is not set: the stack sets it on every function that needs it`);
    return value;
  };
  return {
    api: eks.api ?? api,
    clusterName: need(eks.clusterName, 'EKS_CLUSTER_NAME'),
    region: settings.region,
    routing: eks.routing,
    ...(eks.routing === 'ingress'
      ? { ingressClassName: need(eks.ingressClassName, 'EKS_INGRESS_CLASS') }
      : {
          gateway: {
            name: need(eks.gatewayName, 'EKS_GATEWAY_NAME'),
            namespace: need(eks.gatewayNamespace, 'EKS_GATEWAY_NAMESPACE'),
            sectionName: eks.gatewaySection,
          },
        }),
    protection: eks.protection,
    domain: need(eks.domain, 'EKS_INGRESS_DOMAIN'),
    ingressNamespace: eks.ingressNamespace,
    ingressAnnotations: eks.ingressAnnotations,
    tlsSecretName: eks.tlsSecretName,
    allowFromCidrs: eks.allowFromCidrs,
    systemNamespace: eks.systemNamespace,
    verifierUrl: eks.verifierUrl,
    services: {
      storageSize: eks.dbStorageSize,
      storageClass: eks.dbStorageClass,
      operatorNamespace: eks.cnpgNamespace,
    },
  };
}
