/**
 * The Kubernetes objects of a preview environment, as plain data: names, labels, and one builder per
 * object. No API calls here (eks/apps.ts, eks/teardown.ts and eks/fences.ts write them), so every shape
 * can be checked on its own.
 *
 * Per environment, one Namespace `pv-<owner-repo slug>-<pr>-<hash>` holding:
 * - a ResourceQuota `preview-quota` and a NetworkPolicy `preview-isolation` (ingress only from the
 *   namespace itself and the ingress controller's namespace, so other previews can't reach its pods);
 * - per app, all named `objectName(app)` and labelled `app=<app>`: a Secret (the app's secret bundle and
 *   nothing else), a Deployment (1 replica of the app's image, `PORT` and the plain env vars, `envFrom` the
 *   Secret, a readiness probe), a Service (port 80 → the app's port) and an Ingress (host
 *   `<app>-<namespace>.<domain>`, TLS).
 *
 * Every object carries the generation that last wrote it (`preview-control-plane/generation`) and a hash of
 * what was written (`preview-control-plane/spec-hash`), so a write of an older generation is refused and a
 * write of the same content is skipped (no rollout). A Secret's "hash" is a random version that changes
 * only when its data does (a digest of secret values would let anyone who can read the annotation test
 * guesses); the Deployment's pod template carries that version, so a changed bundle rolls the pods.
 */
import { createHash, randomBytes } from 'node:crypto';
import type {
  V1ConfigMap,
  V1Deployment,
  V1EnvVar,
  V1Ingress,
  V1Namespace,
  V1NetworkPolicy,
  V1ObjectMeta,
  V1ResourceQuota,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import { repoKey } from '../../../manifest/tables.js';
import { DeployFailed } from '../../../shared/step-errors.js';
import type { AppLaunch, RuntimeTarget } from '../port.js';

export const MANAGED_BY = 'preview-control-plane';
const PREFIX = 'preview-control-plane/';
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  app: 'app',
  org: `${PREFIX}org`,
  repo: `${PREFIX}repo`,
  pr: `${PREFIX}pr`,
  /** On an object a preview owns outside its namespace (a ReferenceGrant): that namespace. */
  forNamespace: `${PREFIX}namespace`,
  /** On a pod template: changes with every change of the template, so a rollout's own pods can be found. */
  rollout: `${PREFIX}rollout`,
} as const;
export const ANNOTATIONS = {
  generation: `${PREFIX}generation`,
  specHash: `${PREFIX}spec-hash`,
  repository: `${PREFIX}repository`,
  orgId: `${PREFIX}org-id`,
  envKey: `${PREFIX}env-key`,
  /** On a Secret, and on the pod template of its Deployment: the version of the bundle. */
  secretVersion: `${PREFIX}secret-version`,
  restartedAt: 'kubectl.kubernetes.io/restartedAt',
} as const;

/** The container's name in every pod (logs are read from it). */
export const CONTAINER = 'app';
export const QUOTA_NAME = 'preview-quota';
export const NETWORK_POLICY_NAME = 'preview-isolation';

/** Documented defaults of the options that shape the objects (see `ObjectOptions`). */
export const OBJECT_DEFAULTS = {
  /** Per container. */
  resources: {
    requests: { cpu: '100m', memory: '128Mi' },
    limits: { cpu: '1', memory: '512Mi' },
  },
  /** Per namespace: room for a handful of apps during a rollout (old and new pod side by side). */
  quota: {
    pods: '20',
    'requests.cpu': '4',
    'requests.memory': '8Gi',
    'limits.cpu': '16',
    'limits.memory': '16Gi',
    services: '20',
    'services.loadbalancers': '0',
    'services.nodeports': '0',
  } as Record<string, string>,
  /** How long a rollout may make no progress before the Deployment reports ProgressDeadlineExceeded. */
  progressDeadlineSeconds: 300,
  terminationGracePeriodSeconds: 10,
};

/** How visitors reach a preview's apps (docs/deploy-to-aws.md "Routing"). */
export type Routing = 'gateway' | 'ingress';
/**
 * Who enforces a protected preview's access (docs/deploy-to-aws.md "Protection"): Envoy Gateway's
 * SecurityPolicy, the Gateway API's ExternalAuth filter (experimental channel), or nothing (protection is
 * then refused where it is asked for).
 */
export type Protection = 'envoy-security-policy' | 'gateway-external-auth' | 'none';
export const PROTECTIONS: readonly Protection[] = ['envoy-security-policy', 'gateway-external-auth', 'none'];

/** The Gateway every app's HTTPRoute attaches to (the operator runs it). */
export interface GatewayRef {
  name: string;
  namespace: string;
  /** The listener (`sectionName`), when the Gateway has more than one. */
  sectionName?: string;
}

export interface ObjectOptions {
  /** How visitors reach the apps. @default 'gateway' */
  routing?: Routing;
  /** The Gateway the HTTPRoutes attach to (required with `routing: 'gateway'`). */
  gateway?: GatewayRef;
  /** Who enforces protection. @default 'none' */
  protection?: Protection;
  /** `spec.ingressClassName` of every Ingress (required with `routing: 'ingress'`). */
  ingressClassName?: string;
  /** The wildcard domain: app hosts are `<app>-<namespace>.<domain>` (DNS `*.<domain>`, a wildcard cert). */
  domain: string;
  /** Extra annotations on every Ingress (an ALB's scheme, group, certificate …). */
  ingressAnnotations?: Record<string, string>;
  /** TLS Secret named in every Ingress's `tls` entry; unset: the controller's default (wildcard) cert. */
  tlsSecretName?: string;
  /** The ingress controller's namespace, admitted by the NetworkPolicy (with Gateway routing: the Gateway's). */
  ingressNamespace?: string;
  /** CIDRs admitted by the NetworkPolicy too (an ALB in IP mode connects from the VPC, not a pod). */
  allowFromCidrs?: string[];
  resources?: { requests: Record<string, string>; limits: Record<string, string> };
  quota?: Record<string, string>;
  progressDeadlineSeconds?: number;
  terminationGracePeriodSeconds?: number;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** `s` lower-cased, every run of characters outside [a-z0-9] as one `-`, no `-` at either end. */
export function dnsSlug(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** `s` if it fits in `max` characters; otherwise its head and a hash of all of it (still unique). */
export function fitName(s: string, max = 63): string {
  if (s.length <= max) return s;
  const hash = sha256(s).slice(0, 10);
  return `${s.slice(0, max - hash.length - 1).replace(/-+$/, '')}-${hash}`;
}

/**
 * The namespace of an environment: `pv-<slug of owner-repo>-<pr>-<10 hex>`, at most 63 characters (a long
 * owner is cut to leave the repository room, then the repository is cut). The hash is of the organization,
 * the repository (case-insensitive, as GitHub's names are) and the PR, so two environments never share a
 * namespace, however much of their slugs truncation cut away.
 */
export function namespaceName(t: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>): string {
  const hash = sha256(`${t.orgId}/${repoKey(t.repoFullName)}#${t.prNumber}`).slice(0, 10);
  const pr = String(t.prNumber);
  const room = 63 - 'pv-'.length - pr.length - hash.length - 2;
  const [owner = '', repo = ''] = t.repoFullName.split('/').map(dnsSlug);
  let slug = [owner, repo].filter(Boolean).join('-');
  if (slug.length > room) {
    // Too long: the owner keeps at least 10 characters, the repository gets the rest.
    const ownerPart = owner.slice(0, Math.max(Math.min(owner.length, 10), room - 1 - repo.length));
    slug = `${ownerPart}-${repo}`.slice(0, room);
  }
  slug = slug.replace(/^-+|-+$/g, '');
  return slug ? `pv-${slug}-${pr}-${hash}` : `pv-${pr}-${hash}`;
}

/**
 * The name of an app's Secret, Deployment, Service and Ingress: the app's name (a lower-case DNS label,
 * core/preview-config.ts), unless it starts with a digit, which a Service name may not: then a prefix
 * made of a hash of it keeps it unique.
 */
export function objectName(app: string): string {
  return /^[a-z]/.test(app) ? app : fitName(`a${sha256(app).slice(0, 6)}-${app}`);
}

/** The host of an app's Ingress: one DNS label under the wildcard domain. */
export function hostOf(namespace: string, app: string, domain: string): string {
  return `${fitName(`${app}-${namespace}`)}.${domain}`;
}

/** The URL an app answers at from outside the cluster. */
export function publicUrl(namespace: string, app: string, domain: string): string {
  return `https://${hostOf(namespace, app, domain)}`;
}

/** The URL an app answers at from inside the cluster (its Service, port 80). */
export function internalUrl(target: Pick<RuntimeTarget, 'orgId' | 'repoFullName' | 'prNumber'>, app: string) {
  return `http://${objectName(app)}.${namespaceName(target)}.svc.cluster.local`;
}

/** A label value: [A-Za-z0-9._-], alphanumeric at both ends, at most 63 characters. */
export function labelValue(s: string): string {
  const clean = s.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return fitName(clean).replace(/[^A-Za-z0-9]+$/, '');
}

/** The generation an object was last written for (0 if it carries none). */
export function generationOf(o: { metadata?: V1ObjectMeta } | undefined): number {
  const raw = o?.metadata?.annotations?.[ANNOTATIONS.generation];
  const n = raw === undefined ? 0 : Number(raw);
  return Number.isFinite(n) ? n : 0;
}

export const specHashOf = (o: { metadata?: V1ObjectMeta } | undefined) =>
  o?.metadata?.annotations?.[ANNOTATIONS.specHash];

const managed = { [LABELS.managedBy]: MANAGED_BY };
export const appLabels = (app: string) => ({ ...managed, [LABELS.app]: app });
/** Every object of an app (what `prune` lists). */
export const appSelector = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.app}`;

/** Stamp the content hash (of everything but the generation) and the generation on an object. */
export function stamp<T extends { metadata?: V1ObjectMeta }>(o: T, generation: number, hash?: string): T {
  const specHash = hash ?? sha256(JSON.stringify(o)).slice(0, 16);
  o.metadata = {
    ...o.metadata,
    annotations: {
      ...o.metadata?.annotations,
      [ANNOTATIONS.specHash]: specHash,
      [ANNOTATIONS.generation]: String(generation),
    },
  };
  return o;
}

export function namespaceObject(target: RuntimeTarget): V1Namespace {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: namespaceName(target),
      labels: {
        ...managed,
        [LABELS.org]: labelValue(target.orgId),
        [LABELS.repo]: labelValue(dnsSlug(target.repoFullName.replace('/', '-'))),
        [LABELS.pr]: String(target.prNumber),
      },
      annotations: {
        [ANNOTATIONS.repository]: target.repoFullName,
        [ANNOTATIONS.orgId]: target.orgId,
        [ANNOTATIONS.envKey]: target.envKey,
        [ANNOTATIONS.generation]: String(target.generation),
      },
    },
  };
}

/** The plain variables of an app (those not from its secret bundle), sorted by name. */
export function plainVars(app: AppLaunch): [string, string][] {
  const secret = new Set(app.secretKeys);
  return Object.entries(app.vars)
    .filter(([k]) => !secret.has(k))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The secret variables of an app. */
export function secretVars(app: AppLaunch): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of app.secretKeys) if (app.vars[k] !== undefined) out[k] = app.vars[k]!;
  return out;
}

/**
 * An app's Secret. Its version (annotation and pod-template annotation) is the existing one when the data
 * is unchanged, a fresh random one otherwise.
 */
export function secretObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  existing?: V1Secret,
): V1Secret {
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(secretVars(app)).sort(([a], [b]) => (a < b ? -1 : 1)))
    data[k] = Buffer.from(v, 'utf8').toString('base64');
  const before = existing?.data ?? {};
  const unchanged =
    existing !== undefined &&
    Object.keys(before).length === Object.keys(data).length &&
    Object.entries(data).every(([k, v]) => before[k] === v);
  const version =
    (unchanged ? existing?.metadata?.annotations?.[ANNOTATIONS.secretVersion] : undefined) ??
    randomBytes(8).toString('hex');
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: objectName(app.name),
        namespace,
        labels: appLabels(app.name),
        annotations: { [ANNOTATIONS.secretVersion]: version },
      },
      type: 'Opaque',
      data,
    },
    generation,
    version,
  );
}

export const secretVersionOf = (s: V1Secret) => s.metadata?.annotations?.[ANNOTATIONS.secretVersion] ?? '';

/**
 * An app's Deployment. The image is the launch's; without one (a restart path that fell back to a full
 * apply, say) the running one is kept; with neither, the app cannot run. Its pod template's `rollout`
 * label is the content hash, so each template change is told apart.
 */
export function deploymentObject(
  namespace: string,
  app: AppLaunch,
  secretVersion: string,
  generation: number,
  opts: ObjectOptions,
  existing?: V1Deployment,
  /**
   * What the app's services add (eks/services/): variables from their credentials Secrets, listed before
   * the plain ones that expand them (`$(VAR)`); `replicas` 0 holds the app while its migrate and seed run.
   */
  extra: { env?: V1EnvVar[]; replicas?: number } = {},
): V1Deployment {
  const image = app.image ?? existing?.spec?.template?.spec?.containers?.[0]?.image;
  if (!image) throw new DeployFailed(`app ${app.name} has no image to run: it must be built first`);
  const name = objectName(app.name);
  const port = app.spec.port;
  const env: V1EnvVar[] = [
    { name: 'PORT', value: String(port) },
    ...(extra.env ?? []),
    ...plainVars(app)
      .filter(([k]) => k !== 'PORT')
      .map(([k, v]) => ({ name: k, value: v })),
  ];
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels: appLabels(app.name), annotations: {} },
    spec: {
      replicas: extra.replicas ?? 1,
      revisionHistoryLimit: 2,
      progressDeadlineSeconds: opts.progressDeadlineSeconds ?? OBJECT_DEFAULTS.progressDeadlineSeconds,
      selector: { matchLabels: appLabels(app.name) },
      template: {
        metadata: {
          labels: appLabels(app.name),
          annotations: { [ANNOTATIONS.secretVersion]: secretVersion },
        },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds:
            opts.terminationGracePeriodSeconds ?? OBJECT_DEFAULTS.terminationGracePeriodSeconds,
          containers: [
            {
              name: CONTAINER,
              image,
              imagePullPolicy: 'IfNotPresent',
              ports: [{ name: 'http', containerPort: port, protocol: 'TCP' }],
              env,
              envFrom: [{ secretRef: { name } }],
              readinessProbe: {
                ...(app.spec.health
                  ? { httpGet: { path: app.spec.health, port: 'http' } }
                  : { tcpSocket: { port: 'http' } }),
                periodSeconds: 2,
                timeoutSeconds: 2,
                failureThreshold: 3,
              },
              resources: opts.resources ?? OBJECT_DEFAULTS.resources,
            },
          ],
        },
      },
    },
  };
  const hash = sha256(JSON.stringify(deployment)).slice(0, 16);
  deployment.spec!.template.metadata!.labels![LABELS.rollout] = hash;
  return stamp(deployment, generation, hash);
}

/** The rollout label after a restart at `restartedAt` (a template change of its own). */
export function restartRollout(specHash: string | undefined, restartedAt: string): string {
  return sha256(`${specHash ?? ''}@${restartedAt}`).slice(0, 16);
}

export function serviceObject(namespace: string, app: AppLaunch, generation: number): V1Service {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: objectName(app.name), namespace, labels: appLabels(app.name) },
      spec: {
        type: 'ClusterIP',
        selector: appLabels(app.name),
        ports: [{ name: 'http', port: 80, targetPort: app.spec.port, protocol: 'TCP' }],
      },
    },
    generation,
  );
}

export function ingressObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  opts: ObjectOptions,
): V1Ingress {
  const host = hostOf(namespace, app.name, opts.domain);
  return stamp(
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'Ingress',
      metadata: {
        name: objectName(app.name),
        namespace,
        labels: appLabels(app.name),
        annotations: { ...(opts.ingressAnnotations ?? {}) },
      },
      spec: {
        ...(opts.ingressClassName ? { ingressClassName: opts.ingressClassName } : {}),
        tls: [{ hosts: [host], ...(opts.tlsSecretName ? { secretName: opts.tlsSecretName } : {}) }],
        rules: [
          {
            host,
            http: {
              paths: [
                {
                  path: '/',
                  pathType: 'Prefix',
                  backend: { service: { name: objectName(app.name), port: { number: 80 } } },
                },
              ],
            },
          },
        ],
      },
    },
    generation,
  );
}

export function quotaObject(namespace: string, generation: number, opts: ObjectOptions): V1ResourceQuota {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'ResourceQuota',
      metadata: { name: QUOTA_NAME, namespace, labels: { ...managed } },
      spec: { hard: { ...(opts.quota ?? OBJECT_DEFAULTS.quota) } },
    },
    generation,
  );
}

export function networkPolicyObject(
  namespace: string,
  generation: number,
  opts: ObjectOptions,
  /** More namespaces admitted: KEDA's, whose interceptor forwards to a sleeping environment's apps. */
  alsoFrom: string[] = [],
): V1NetworkPolicy {
  const ingressNamespace =
    opts.ingressNamespace ?? (opts.routing === 'ingress' ? undefined : opts.gateway?.namespace);
  return stamp(
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: NETWORK_POLICY_NAME, namespace, labels: { ...managed } },
      spec: {
        podSelector: {},
        policyTypes: ['Ingress'],
        ingress: [
          {
            // `_from`: client-node's name for `from` (a reserved word); it serializes as `from`.
            _from: [
              { podSelector: {} },
              ...(ingressNamespace
                ? [
                    {
                      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ingressNamespace } },
                    },
                  ]
                : []),
              ...alsoFrom.map((name) => ({
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': name } },
              })),
              ...(opts.allowFromCidrs ?? []).map((cidr) => ({ ipBlock: { cidr } })),
            ],
          },
        ],
      },
    },
    generation,
  );
}

/**
 * The fence left behind by a teardown: a ConfigMap in the system namespace, named after the environment's
 * namespace, holding the teardown's generation. It outlives the namespace, so a late call of an older
 * generation can't re-create what the teardown removed.
 */
export function fenceName(namespace: string): string {
  return `fence-${namespace}`;
}
export function fenceObject(
  systemNamespace: string,
  target: RuntimeTarget,
  resourceVersion?: string,
): V1ConfigMap {
  const namespace = namespaceName(target);
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: fenceName(namespace),
      namespace: systemNamespace,
      labels: { ...managed },
      annotations: { [ANNOTATIONS.generation]: String(target.generation) },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    data: {
      namespace,
      repository: target.repoFullName,
      orgId: target.orgId,
      envKey: target.envKey,
      tornDownAt: new Date().toISOString(),
    },
  };
}
