/**
 * The Kubernetes API as the EKS runtime uses it: the real `@kubernetes/client-node` (CoreV1Api, AppsV1Api,
 * NetworkingV1Api) behind a small table of resources with the same six verbs each, and the API's errors
 * as `KubeError`s (code, reason, message, and which call it was).
 *
 * The client is loaded on first use, not at import: `@kubernetes/client-node` 2 brings undici 8, which
 * needs Node ≥ 22.19 (Lambda's nodejs22.x has it). Loading it lazily keeps every module that merely
 * imports the registry loadable on Node 20 (local mode, tests); where it does run on Node 20 (this
 * adapter's tests), two stand-ins for built-ins undici 8 touches while loading are installed first (see
 * `loadClient`).
 */
import type * as k8s from '@kubernetes/client-node';
import type {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObject,
  NetworkingV1Api,
  V1ConfigMap,
  V1Deployment,
  V1Ingress,
  V1Job,
  V1Namespace,
  V1NetworkPolicy,
  V1Pod,
  V1ResourceQuota,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import { CUSTOM_KINDS, type CustomKind, type CustomKindDef } from './engines.js';

type ClientModule = typeof k8s;
let client: Promise<ClientModule> | undefined;

/**
 * `@kubernetes/client-node`, loaded once. On Node < 22.19, undici 8 reads `zlib.createZstdDecompress` and
 * `worker_threads.markAsUncloneable` while it loads (and calls `Promise.withResolvers`, which
 * shared/polyfills.ts provides); stand-ins are installed where they are missing (zstd:
 * throws if a server ever answers zstd-encoded, which the Kubernetes API server never does; the other: a
 * no-op, it only marks objects as not transferable to workers).
 */
export function loadClient(): Promise<ClientModule> {
  client ??= (async () => {
    await import('../../../shared/polyfills.js'); // Promise.withResolvers, which undici 8 uses too
    const zlib = (await import('node:zlib')).default as unknown as Record<string, unknown>;
    const workers = (await import('node:worker_threads')).default as unknown as Record<string, unknown>;
    if (typeof zlib.createZstdDecompress !== 'function')
      zlib.createZstdDecompress = () => {
        throw new Error('zstd-encoded responses need Node ≥ 22.15');
      };
    if (typeof workers.markAsUncloneable !== 'function') workers.markAsUncloneable = () => undefined;
    return import('@kubernetes/client-node');
  })();
  return client;
}

/** An error the API server answered (or a failure to reach it: code 0), with the call it answered. */
export class KubeError extends Error {
  override name = 'KubeError';
  constructor(
    /** What was attempted, e.g. `create Deployment pv-…/web`. */
    readonly op: string,
    /** HTTP status; 0 when the server was not reached. */
    readonly code: number,
    /** The `Status` reason (NotFound, AlreadyExists, Conflict, Forbidden, Invalid …), if any. */
    readonly reason: string,
    readonly detail: string,
  ) {
    super(`${op}: ${code ? `${code} ${reason}` : 'unreachable'}${detail ? `: ${detail}` : ''}`);
  }

  static from(op: string, err: unknown): KubeError {
    if (err instanceof KubeError) return err;
    const e = err as { code?: unknown; body?: unknown; message?: string; cause?: { code?: string } };
    if (typeof e?.code === 'number') {
      let status: { reason?: string; message?: string } = {};
      try {
        status = typeof e.body === 'string' ? JSON.parse(e.body) : ((e.body as typeof status) ?? {});
      } catch {
        // not a Status body: keep the code alone
      }
      return new KubeError(op, e.code, status.reason ?? '', status.message ?? '');
    }
    // fetch failed (DNS, TLS, reset …): undici puts the reason in `cause`.
    return new KubeError(op, 0, '', e?.cause?.code ?? e?.message ?? String(err));
  }
}

export const isCode = (err: unknown, code: number) => err instanceof KubeError && err.code === code;

/** The six verbs of a resource. Cluster-scoped resources ignore `namespace`. */
export interface Resource<T extends KubernetesObject> {
  kind: string;
  read(namespace: string, name: string): Promise<T>;
  create(namespace: string, body: T): Promise<T>;
  replace(namespace: string, name: string, body: T): Promise<T>;
  /** JSON merge patch (RFC 7386, `application/merge-patch+json`). */
  patch(namespace: string, name: string, patch: object): Promise<T>;
  remove(
    namespace: string,
    name: string,
    opts?: { resourceVersion?: string; propagationPolicy?: 'Foreground' | 'Background' | 'Orphan' },
  ): Promise<void>;
  list(namespace: string, labelSelector?: string): Promise<T[]>;
}

/** A custom resource as plain data (eks/scale-to-zero.ts, eks/gateway.ts build them), as the CRD's schema has it. */
export interface CustomObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: Record<string, unknown>;
}

export interface Kube {
  namespaces: Resource<V1Namespace>;
  configMaps: Resource<V1ConfigMap>;
  secrets: Resource<V1Secret>;
  services: Resource<V1Service>;
  quotas: Resource<V1ResourceQuota>;
  pods: Resource<V1Pod>;
  deployments: Resource<V1Deployment>;
  ingresses: Resource<V1Ingress>;
  networkPolicies: Resource<V1NetworkPolicy>;
  /** A preview's seed and migrate runs (eks/services/). */
  jobs: Resource<V1Job>;
  /** The custom resources of the optional engines (eks/engines.ts `CUSTOM_KINDS`), through CustomObjectsApi. */
  httpScaledObjects: Resource<CustomObject>;
  interceptorRoutes: Resource<CustomObject>;
  scaledObjects: Resource<CustomObject>;
  httpRoutes: Resource<CustomObject>;
  referenceGrants: Resource<CustomObject>;
  securityPolicies: Resource<CustomObject>;
  backends: Resource<CustomObject>;
  clusters: Resource<CustomObject>;
  podLog(
    namespace: string,
    name: string,
    opts: { tailLines: number; previous?: boolean; limitBytes?: number },
  ): Promise<string>;
}

export interface ClusterAccess {
  /** `https://…` */
  server: string;
  /** The cluster CA, base64 of its PEM (as `eks:DescribeCluster` gives it). */
  caData: string;
  /** A bearer token, fresh enough (asked for on every request). */
  token: () => Promise<string>;
}

const AUTH_PROVIDER = 'preview-eks-token';

/** Clients for a cluster: a KubeConfig built in code (no file), authenticated by `access.token`. */
export async function connect(access: ClusterAccess): Promise<Kube> {
  const m = await loadClient();
  const kc = new m.KubeConfig();
  kc.addAuthenticator({
    isAuthProvider: (user) => user?.authProvider?.name === AUTH_PROVIDER,
    applyAuthentication: async (_user, opts) => {
      opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer ${await access.token()}` };
    },
  });
  kc.loadFromOptions({
    clusters: [{ name: 'eks', server: access.server, caData: access.caData, skipTLSVerify: false }],
    users: [{ name: 'runtime', authProvider: { name: AUTH_PROVIDER, config: {} } }],
    contexts: [{ name: 'eks', cluster: 'eks', user: 'runtime' }],
    currentContext: 'eks',
  });
  const core: CoreV1Api = kc.makeApiClient(m.CoreV1Api);
  const apps: AppsV1Api = kc.makeApiClient(m.AppsV1Api);
  const net: NetworkingV1Api = kc.makeApiClient(m.NetworkingV1Api);
  const custom: CustomObjectsApi = kc.makeApiClient(m.CustomObjectsApi);
  const batch: BatchV1Api = kc.makeApiClient(m.BatchV1Api);
  const merge = m.setHeaderOptions('Content-Type', m.PatchStrategy.MergePatch);
  const del = (opts?: { resourceVersion?: string; propagationPolicy?: string }) => ({
    ...(opts?.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
    ...(opts?.resourceVersion ? { body: { preconditions: { resourceVersion: opts.resourceVersion } } } : {}),
  });
  const sel = (labelSelector?: string) => (labelSelector ? { labelSelector } : {});

  return {
    namespaces: {
      kind: 'Namespace',
      read: (_ns, name) => core.readNamespace({ name }),
      create: (_ns, body) => core.createNamespace({ body }),
      replace: (_ns, name, body) => core.replaceNamespace({ name, body }),
      patch: (_ns, name, body) => core.patchNamespace({ name, body }, merge),
      remove: async (_ns, name, o) => void (await core.deleteNamespace({ name, ...del(o) })),
      list: async (_ns, s) => (await core.listNamespace(sel(s))).items,
    },
    configMaps: {
      kind: 'ConfigMap',
      read: (namespace, name) => core.readNamespacedConfigMap({ namespace, name }),
      create: (namespace, body) => core.createNamespacedConfigMap({ namespace, body }),
      replace: (namespace, name, body) => core.replaceNamespacedConfigMap({ namespace, name, body }),
      patch: (namespace, name, body) => core.patchNamespacedConfigMap({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await core.deleteNamespacedConfigMap({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await core.listNamespacedConfigMap({ namespace, ...sel(s) })).items,
    },
    secrets: {
      kind: 'Secret',
      read: (namespace, name) => core.readNamespacedSecret({ namespace, name }),
      create: (namespace, body) => core.createNamespacedSecret({ namespace, body }),
      replace: (namespace, name, body) => core.replaceNamespacedSecret({ namespace, name, body }),
      patch: (namespace, name, body) => core.patchNamespacedSecret({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await core.deleteNamespacedSecret({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await core.listNamespacedSecret({ namespace, ...sel(s) })).items,
    },
    services: {
      kind: 'Service',
      read: (namespace, name) => core.readNamespacedService({ namespace, name }),
      create: (namespace, body) => core.createNamespacedService({ namespace, body }),
      replace: (namespace, name, body) => core.replaceNamespacedService({ namespace, name, body }),
      patch: (namespace, name, body) => core.patchNamespacedService({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await core.deleteNamespacedService({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await core.listNamespacedService({ namespace, ...sel(s) })).items,
    },
    quotas: {
      kind: 'ResourceQuota',
      read: (namespace, name) => core.readNamespacedResourceQuota({ namespace, name }),
      create: (namespace, body) => core.createNamespacedResourceQuota({ namespace, body }),
      replace: (namespace, name, body) => core.replaceNamespacedResourceQuota({ namespace, name, body }),
      patch: (namespace, name, body) => core.patchNamespacedResourceQuota({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await core.deleteNamespacedResourceQuota({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await core.listNamespacedResourceQuota({ namespace, ...sel(s) })).items,
    },
    pods: {
      kind: 'Pod',
      read: (namespace, name) => core.readNamespacedPod({ namespace, name }),
      create: (namespace, body) => core.createNamespacedPod({ namespace, body }),
      replace: (namespace, name, body) => core.replaceNamespacedPod({ namespace, name, body }),
      patch: (namespace, name, body) => core.patchNamespacedPod({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await core.deleteNamespacedPod({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await core.listNamespacedPod({ namespace, ...sel(s) })).items,
    },
    deployments: {
      kind: 'Deployment',
      read: (namespace, name) => apps.readNamespacedDeployment({ namespace, name }),
      create: (namespace, body) => apps.createNamespacedDeployment({ namespace, body }),
      replace: (namespace, name, body) => apps.replaceNamespacedDeployment({ namespace, name, body }),
      patch: (namespace, name, body) => apps.patchNamespacedDeployment({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await apps.deleteNamespacedDeployment({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await apps.listNamespacedDeployment({ namespace, ...sel(s) })).items,
    },
    ingresses: {
      kind: 'Ingress',
      read: (namespace, name) => net.readNamespacedIngress({ namespace, name }),
      create: (namespace, body) => net.createNamespacedIngress({ namespace, body }),
      replace: (namespace, name, body) => net.replaceNamespacedIngress({ namespace, name, body }),
      patch: (namespace, name, body) => net.patchNamespacedIngress({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await net.deleteNamespacedIngress({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await net.listNamespacedIngress({ namespace, ...sel(s) })).items,
    },
    networkPolicies: {
      kind: 'NetworkPolicy',
      read: (namespace, name) => net.readNamespacedNetworkPolicy({ namespace, name }),
      create: (namespace, body) => net.createNamespacedNetworkPolicy({ namespace, body }),
      replace: (namespace, name, body) => net.replaceNamespacedNetworkPolicy({ namespace, name, body }),
      patch: (namespace, name, body) => net.patchNamespacedNetworkPolicy({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await net.deleteNamespacedNetworkPolicy({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await net.listNamespacedNetworkPolicy({ namespace, ...sel(s) })).items,
    },
    jobs: {
      kind: 'Job',
      read: (namespace, name) => batch.readNamespacedJob({ namespace, name }),
      create: (namespace, body) => batch.createNamespacedJob({ namespace, body }),
      replace: (namespace, name, body) => batch.replaceNamespacedJob({ namespace, name, body }),
      patch: (namespace, name, body) => batch.patchNamespacedJob({ namespace, name, body }, merge),
      remove: async (namespace, name, o) =>
        void (await batch.deleteNamespacedJob({ namespace, name, ...del(o) })),
      list: async (namespace, s) => (await batch.listNamespacedJob({ namespace, ...sel(s) })).items,
    },
    ...(Object.fromEntries(
      Object.entries(CUSTOM_KINDS).map(([key, crd]) => [key, customResource(custom, merge, del, sel, crd)]),
    ) as Record<CustomKind, Resource<CustomObject>>),
    podLog: (namespace, name, o) =>
      core.readNamespacedPodLog({
        namespace,
        name,
        container: 'app',
        tailLines: o.tailLines,
        ...(o.previous ? { previous: true } : {}),
        ...(o.limitBytes ? { limitBytes: o.limitBytes } : {}),
      }),
  };
}

/** The six verbs of a custom resource (one of `CUSTOM_KINDS`) over CustomObjectsApi. */
function customResource(
  custom: CustomObjectsApi,
  merge: ReturnType<ClientModule['setHeaderOptions']>,
  del: (o?: { resourceVersion?: string; propagationPolicy?: string }) => object,
  sel: (labelSelector?: string) => object,
  def: CustomKindDef,
): Resource<CustomObject> {
  const crd = { group: def.group, version: def.version, plural: def.plural };
  return {
    kind: def.kind,
    read: (namespace, name) => custom.getNamespacedCustomObject({ ...crd, namespace, name }),
    create: (namespace, body) => custom.createNamespacedCustomObject({ ...crd, namespace, body }),
    replace: (namespace, name, body) =>
      custom.replaceNamespacedCustomObject({ ...crd, namespace, name, body }),
    patch: (namespace, name, body) =>
      custom.patchNamespacedCustomObject({ ...crd, namespace, name, body }, merge),
    remove: async (namespace, name, o) =>
      void (await custom.deleteNamespacedCustomObject({ ...crd, namespace, name, ...del(o) })),
    list: async (namespace, s) =>
      (await custom.listNamespacedCustomObject({ ...crd, namespace, ...sel(s) })).items,
  };
}
