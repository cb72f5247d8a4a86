/**
 * The custom kinds the fake Kubernetes API (index.ts, server.ts) serves, and the checks their CRDs make. Test
 * support code. Each table below is derived from the CRD's own `openAPIV3Schema` (every `required` list
 * of every object, `[]` for an array's items, `.` for the object itself; status left out), plus the
 * enums and the CEL rules (`x-kubernetes-validations`) that an object of this service could break:
 *
 * | Kind | CRD (file, version) | Source |
 * |---|---|---|
 * | InterceptorRoute | config/crd/bases/http.keda.sh_interceptorroutes.yaml, v1beta1 | kedacore/http-add-on 59b2f6a (v0.15.0+7) |
 * | HTTPScaledObject | config/crd/bases/http.keda.sh_httpscaledobjects.yaml, v1alpha1 | kedacore/http-add-on 59b2f6a |
 * | ScaledObject | config/crd/bases/keda.sh_scaledobjects.yaml, v1alpha1 | kedacore/keda 8b4f083 (v2.20.1+117) |
 * | HTTPRoute | config/crd/{standard,experimental}/gateway.networking.k8s.io_httproutes.yaml, v1 | kubernetes-sigs/gateway-api 4564255 (v1.6.1+) |
 * | ReferenceGrant | config/crd/standard/gateway.networking.k8s.io_referencegrants.yaml, v1beta1 | kubernetes-sigs/gateway-api 4564255 |
 * | SecurityPolicy | charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_securitypolicies.yaml, v1alpha1 | envoyproxy/gateway d32f282 (v1.9.0+) |
 * | Backend | charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backends.yaml, v1alpha1 | envoyproxy/gateway d32f282 |
 * | Cluster | config/crd/bases/postgresql.cnpg.io_clusters.yaml, v1 | cloudnative-pg/cloudnative-pg a95a534 (v1.30.0+86) |
 *
 * The Cluster's table keeps the required lists of the fields a preview's Cluster can carry (bootstrap,
 * externalClusters, storage, secrets), and its checks add the schema's `instances` minimum and `import.type`
 * enum, its CEL rule on imageName/imageCatalogRef, and one check of CloudNativePG's admission webhook: an
 * import's source names an entry of `externalClusters`.
 *
 * The HTTPRoute's channel matters: the standard CRD's filter `type` enum has no `ExternalAuth` and its
 * schema no `externalAuth` field (the experimental one has both), so the fake refuses that filter unless
 * it runs the experimental channel (`gatewayChannel`), as a real cluster with the standard CRDs does.
 */

type Obj = Record<string, any>;

export interface CrdDef {
  group: string;
  version: string;
  kind: string;
  namespaced: true;
  generation: true;
  crd: true;
}
const crd = (group: string, version: string, kind: string): CrdDef => ({
  group,
  version,
  kind,
  namespaced: true,
  generation: true,
  crd: true,
});

/** The custom resources, by plural. */
export const CRD_RESOURCES: Record<string, CrdDef> = {
  httpscaledobjects: crd('http.keda.sh', 'v1alpha1', 'HTTPScaledObject'),
  interceptorroutes: crd('http.keda.sh', 'v1beta1', 'InterceptorRoute'),
  scaledobjects: crd('keda.sh', 'v1alpha1', 'ScaledObject'),
  httproutes: crd('gateway.networking.k8s.io', 'v1', 'HTTPRoute'),
  referencegrants: crd('gateway.networking.k8s.io', 'v1beta1', 'ReferenceGrant'),
  securitypolicies: crd('gateway.envoyproxy.io', 'v1alpha1', 'SecurityPolicy'),
  backends: crd('gateway.envoyproxy.io', 'v1alpha1', 'Backend'),
  clusters: crd('postgresql.cnpg.io', 'v1', 'Cluster'),
};

/** Every CRD the fake can serve, as `<plural>.<group>` (what `crds` names). */
export const ALL_CRDS = Object.entries(CRD_RESOURCES).map(([plural, d]) => `${plural}.${d.group}`);

/** Required fields, per object path (from the CRDs: see the table above). */
const REQUIRED: Record<string, Record<string, string[]>> = {
  interceptorroutes: {
    '.': ['metadata', 'spec'],
    spec: ['scalingMetric', 'target'],
    'spec.coldStart.fallback': ['service'],
    'spec.coldStart.fallback.service': ['name'],
    'spec.coldStart.placeholder': ['response'],
    'spec.rules[].headers[]': ['name'],
    'spec.rules[].paths[]': ['value'],
    'spec.scalingMetric.concurrency': ['targetValue'],
    'spec.scalingMetric.requestRate': ['targetValue'],
    'spec.staticRoutes[]': ['response', 'rules'],
    'spec.target': ['service'],
  },
  httpscaledobjects: {
    spec: ['scaleTargetRef'],
    'spec.headers[]': ['name'],
    'spec.scaleTargetRef': ['service'],
  },
  scaledobjects: {
    '.': ['spec'],
    spec: ['scaleTargetRef', 'triggers'],
    'spec.fallback': ['failureThreshold', 'replicas'],
    'spec.scaleTargetRef': ['name'],
    'spec.triggers[]': ['metadata', 'type'],
    'spec.triggers[].authenticationRef': ['name'],
  },
  httproutes: {
    '.': ['spec'],
    'spec.parentRefs[]': ['name'],
    'spec.rules[].backendRefs[]': ['name'],
    'spec.rules[].filters[]': ['type'],
    'spec.rules[].filters[].extensionRef': ['group', 'kind', 'name'],
    'spec.rules[].filters[].externalAuth': ['backendRef', 'protocol'],
    'spec.rules[].filters[].externalAuth.backendRef': ['name'],
    'spec.rules[].filters[].requestHeaderModifier.add[]': ['name', 'value'],
    'spec.rules[].filters[].requestHeaderModifier.set[]': ['name', 'value'],
    'spec.rules[].filters[].urlRewrite.path': ['type'],
    'spec.rules[].matches[].headers[]': ['name', 'value'],
    'spec.rules[].matches[].queryParams[]': ['name', 'value'],
  },
  referencegrants: {
    '.': ['spec'],
    spec: ['from', 'to'],
    'spec.from[]': ['group', 'kind', 'namespace'],
    'spec.to[]': ['group', 'kind'],
  },
  securitypolicies: {
    '.': ['spec'],
    'spec.targetRefs[]': ['group', 'kind', 'name'],
    'spec.extAuth.http.backendRef': ['name'],
    'spec.extAuth.http.backendRefs[]': ['name'],
  },
  clusters: {
    '.': ['metadata', 'spec'],
    spec: ['instances'],
    'spec.bootstrap.initdb.import': ['databases', 'source', 'type'],
    'spec.bootstrap.initdb.import.source': ['externalCluster'],
    'spec.bootstrap.initdb.secret': ['name'],
    'spec.bootstrap.pg_basebackup': ['source'],
    'spec.bootstrap.recovery.secret': ['name'],
    'spec.externalClusters[]': ['name'],
    'spec.externalClusters[].password': ['key'],
    'spec.imagePullSecrets[]': ['name'],
    'spec.managed.roles[]': ['name'],
    'spec.managed.roles[].passwordSecret': ['name'],
    'spec.superuserSecret': ['name'],
    'spec.storage.pvcTemplate.dataSource': ['kind', 'name'],
  },
  backends: {
    '.': ['spec'],
    'spec.endpoints[].fqdn': ['hostname', 'port'],
    'spec.endpoints[].ip': ['address', 'port'],
    'spec.endpoints[].unix': ['path'],
  },
};

const STANDARD_FILTERS = [
  'RequestHeaderModifier',
  'ResponseHeaderModifier',
  'RequestMirror',
  'RequestRedirect',
  'URLRewrite',
  'ExtensionRef',
  'CORS',
];
const EXPERIMENTAL_FILTERS = [...STANDARD_FILTERS, 'ExternalAuth'];

/** Every node at `path` (`a.b[].c`: each item of the list `b`) of `o`. */
function nodesAt(o: unknown, path: string): unknown[] {
  if (path === '.') return [o];
  let nodes: unknown[] = [o];
  for (const part of path.split('.')) {
    const list = part.endsWith('[]');
    const key = list ? part.slice(0, -2) : part;
    nodes = nodes.flatMap((n) => {
      const v = n && typeof n === 'object' ? (n as Obj)[key] : undefined;
      if (v === undefined || v === null) return [];
      return list ? (Array.isArray(v) ? v : []) : [v];
    });
  }
  return nodes;
}

export interface CrdCheckOptions {
  /** The installed HTTPRoute CRD's channel. @default 'standard' */
  gatewayChannel?: 'standard' | 'experimental';
}

/** What the CRD's schema refuses in `o` (`{ field, message }`, as a 422's causes). */
export function crdProblems(
  resource: string,
  o: Obj,
  opts: CrdCheckOptions = {},
): { field: string; message: string }[] {
  const causes: { field: string; message: string }[] = [];
  for (const [path, keys] of Object.entries(REQUIRED[resource] ?? {}))
    for (const node of nodesAt(o, path))
      for (const key of keys)
        if (!node || typeof node !== 'object' || (node as Obj)[key] === undefined)
          causes.push({ field: `${path === '.' ? '' : `${path}.`}${key}`, message: 'Required value' });
  const spec = o.spec ?? {};
  const serviceRefNeedsPort = (where: string, ref: Obj | undefined) => {
    if (ref && (ref.group ?? '') === '' && (ref.kind ?? 'Service') === 'Service' && ref.port === undefined)
      causes.push({ field: where, message: 'Must have port for Service reference' });
  };
  if (resource === 'httproutes') {
    const allowed = opts.gatewayChannel === 'experimental' ? EXPERIMENTAL_FILTERS : STANDARD_FILTERS;
    for (const rule of spec.rules ?? []) {
      for (const ref of rule.backendRefs ?? []) serviceRefNeedsPort('spec.rules[].backendRefs[]', ref);
      for (const f of rule.filters ?? []) {
        if (!allowed.includes(f.type))
          causes.push({
            field: 'spec.rules[].filters[].type',
            message: `Unsupported value: "${f.type}": supported values: ${allowed.map((a) => `"${a}"`).join(', ')}`,
          });
        if (f.type === 'ExternalAuth' && f.externalAuth) {
          const ea = f.externalAuth;
          serviceRefNeedsPort('spec.rules[].filters[].externalAuth.backendRef', ea.backendRef);
          if (!['HTTP', 'GRPC'].includes(ea.protocol))
            causes.push({
              field: 'spec.rules[].filters[].externalAuth.protocol',
              message: 'Unsupported value',
            });
          if (ea.protocol === 'HTTP' && !ea.http)
            causes.push({
              field: 'spec.rules[].filters[].externalAuth',
              message: "http must be specified when protocol is set to 'HTTP'",
            });
        }
      }
    }
  }
  if (resource === 'interceptorroutes') {
    const t = spec.target;
    if (t && (t.port === undefined) === (t.portName === undefined))
      causes.push({ field: 'spec.target', message: "exactly one of 'port' or 'portName' must be set" });
    const m = spec.scalingMetric;
    if (m && !m.concurrency && !m.requestRate)
      causes.push({
        field: 'spec.scalingMetric',
        message: "at least one of 'concurrency' or 'requestRate' must be set",
      });
  }
  if (resource === 'scaledobjects') {
    const min = spec.minReplicaCount;
    if (min !== undefined && min > (spec.maxReplicaCount ?? 100))
      causes.push({
        field: 'spec',
        message: 'minReplicaCount must be less than or equal to maxReplicaCount',
      });
  }
  if (resource === 'securitypolicies') {
    if (!spec.targetRef && !spec.targetRefs && !spec.targetSelectors?.length)
      causes.push({ field: 'spec', message: 'either targetRef or targetRefs must be used' });
    const ea = spec.extAuth;
    if (ea) {
      if (Boolean(ea.grpc) === Boolean(ea.http))
        causes.push({ field: 'spec.extAuth', message: 'exactly one of grpc or http must be specified' });
      if (ea.http && !ea.http.backendRef && !ea.http.backendRefs?.length)
        causes.push({ field: 'spec.extAuth.http', message: 'backendRef or backendRefs needs to be set' });
      for (const ref of ea.http?.backendRefs ?? []) {
        if (!['Service', 'ServiceImport', 'Backend'].includes(ref.kind ?? 'Service'))
          causes.push({
            field: 'spec.extAuth.http.backendRefs',
            message: 'BackendRefs only supports Service, ServiceImport, and Backend kind.',
          });
        serviceRefNeedsPort('spec.extAuth.http.backendRefs[]', ref);
      }
    }
  }
  if (resource === 'clusters') {
    if (typeof spec.instances === 'number' && spec.instances < 1)
      causes.push({ field: 'spec.instances', message: 'should be greater than or equal to 1' });
    if (spec.imageName !== undefined && spec.imageCatalogRef !== undefined)
      causes.push({ field: 'spec', message: 'imageName and imageCatalogRef are mutually exclusive' });
    const imp = spec.bootstrap?.initdb?.import;
    if (imp?.type !== undefined && !['microservice', 'monolith'].includes(imp.type))
      causes.push({
        field: 'spec.bootstrap.initdb.import.type',
        message: `Unsupported value: "${imp.type}": supported values: "microservice", "monolith"`,
      });
    const source = imp?.source?.externalCluster;
    if (source && !(spec.externalClusters ?? []).some((c: Obj) => c.name === source))
      causes.push({
        field: 'spec.bootstrap.initdb.import.source.externalCluster',
        message: `external cluster ${source} not found (the operator's webhook)`,
      });
  }
  if (resource === 'backends')
    for (const e of spec.endpoints ?? [])
      if ([e.fqdn, e.ip, e.unix].filter(Boolean).length !== 1)
        causes.push({ field: 'spec.endpoints[]', message: 'exactly one of fqdn, ip or unix' });
  return causes;
}
