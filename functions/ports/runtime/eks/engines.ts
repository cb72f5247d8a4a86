/**
 * The optional engines of the cluster and the custom kinds each one brings. A preview's deploy needs only
 * the Kubernetes built-ins; every other kind belongs to an engine the operator installs when they want its
 * feature (docs/deploy-to-aws.md "Prerequisites"). So every kind listed here is optional unless the preview
 * uses it:
 * - listing it (a prune, a clean-up of what an earlier version left) answers 404 on a cluster without its
 *   CRD: that means "not installed", nothing of that kind can exist, and the deploy goes on
 *   (eks/connection.ts `listOptional`);
 * - a preview that needs it is refused before anything is written, with an error naming the engine and how
 *   to install it (eks/connection.ts `requireKinds`).
 *
 * A new kind is one line of `CUSTOM_KINDS` naming its engine (and its resource in eks/client.ts's `Kube`).
 */

/** An engine: what an operator installs, named as they know it, and how. */
export interface Engine {
  name: string;
  install: string;
}

export const ENGINES = {
  'keda-http': {
    name: "KEDA with its HTTP add-on (scale to zero: the application's sleepAfterMinutes)",
    install:
      'helm install keda kedacore/keda -n keda --create-namespace && helm install http-add-on kedacore/keda-add-ons-http -n keda (docs/deploy-to-aws.md, "Scale to zero")',
  },
  'gateway-api': {
    name: 'the Gateway API CRDs (standard channel, v1.x) and a Gateway implementation',
    install:
      'kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.6.1/standard-install.yaml (docs/deploy-to-aws.md, "Routing")',
  },
  'envoy-gateway': {
    name: "Envoy Gateway (its SecurityPolicy protects previews: the stack's protection setting envoy-security-policy)",
    install:
      'helm install eg oci://docker.io/envoyproxy/gateway-helm -n envoy-gateway-system --create-namespace (docs/deploy-to-aws.md, "Protection")',
  },
  'cloudnative-pg': {
    name: "CloudNativePG (preview.yaml's postgres services)",
    install:
      'kubectl apply --server-side -f https://raw.githubusercontent.com/cloudnative-pg/cloudnative-pg/release-1.30/releases/cnpg-1.30.0.yaml (docs/deploy-to-aws.md, "Databases")',
  },
} satisfies Record<string, Engine>;
export type EngineId = keyof typeof ENGINES;

/** A custom kind as the API addresses it, and the engine that brings it. */
export interface CustomKindDef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  engine: EngineId;
}

/**
 * Every custom kind the adapter writes, lists or prunes. Versions: what the objects were written for
 * (docs/deploy-to-aws.md names them and the command that shows a cluster's own).
 */
export const CUSTOM_KINDS = {
  /** KEDA HTTP add-on's deprecated kind: only removed (what an earlier version of this service wrote). */
  httpScaledObjects: k('http.keda.sh', 'v1alpha1', 'httpscaledobjects', 'HTTPScaledObject', 'keda-http'),
  interceptorRoutes: k('http.keda.sh', 'v1beta1', 'interceptorroutes', 'InterceptorRoute', 'keda-http'),
  scaledObjects: k('keda.sh', 'v1alpha1', 'scaledobjects', 'ScaledObject', 'keda-http'),
  httpRoutes: k('gateway.networking.k8s.io', 'v1', 'httproutes', 'HTTPRoute', 'gateway-api'),
  referenceGrants: k(
    'gateway.networking.k8s.io',
    'v1beta1',
    'referencegrants',
    'ReferenceGrant',
    'gateway-api',
  ),
  backends: k('gateway.envoyproxy.io', 'v1alpha1', 'backends', 'Backend', 'envoy-gateway'),
  securityPolicies: k(
    'gateway.envoyproxy.io',
    'v1alpha1',
    'securitypolicies',
    'SecurityPolicy',
    'envoy-gateway',
  ),
  /** CloudNativePG's Postgres cluster: one per postgres service (eks/services/). */
  clusters: k('postgresql.cnpg.io', 'v1', 'clusters', 'Cluster', 'cloudnative-pg'),
} satisfies Record<string, CustomKindDef>;
export type CustomKind = keyof typeof CUSTOM_KINDS;

function k(group: string, version: string, plural: string, kind: string, engine: EngineId): CustomKindDef {
  return { group, version, plural, kind, engine };
}

/** `kind`'s engine, when it is a custom kind (undefined: a Kubernetes built-in, always there). */
export function engineOf(kind: string): (Engine & { id: EngineId }) | undefined {
  const def = (CUSTOM_KINDS as Record<string, CustomKindDef>)[kind];
  return def ? { id: def.engine, ...ENGINES[def.engine] } : undefined;
}

/** `apiVersion` of a custom kind's objects. */
export const apiVersionOf = (kind: CustomKind) => `${CUSTOM_KINDS[kind].group}/${CUSTOM_KINDS[kind].version}`;
