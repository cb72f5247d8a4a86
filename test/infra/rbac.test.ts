import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { EksCluster } from '../../functions/ports/runtime/eks/cluster.js';
import { MANAGED_BY } from '../../functions/ports/runtime/eks/objects.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../../functions/ports/runtime/port.js';
import type { TaskOutcome } from '../../functions/ports/workflows/port.js';
import { setLogSink } from '../../functions/shared/log.js';
import { clusterGroup } from '../../lib/cdk/access.js';
import { FakeKubernetes } from '../cloud/fakes/kubernetes/index.js';
import { FakeEksAndLambda } from '../cloud/fakes/kubernetes-aws.js';
import { type Json, repoRoot } from './synth.js';

/*
 * deploy/rbac.yaml (what the Kubernetes group of the runtime's roles may do) and
 * deploy/admission-policy.yaml (what confines its writes to the preview namespaces). The RBAC is held
 * two ways: to the exact list of rights below, and to what the EKS runtime adapter really calls, by running
 * its whole lifecycle against the loopback fake Kubernetes API (test/cloud/fakes/kubernetes/) and
 * checking that every request is granted and every granted right was used.
 */

const load = (file: string): Json[] =>
  parseAllDocuments(readFileSync(join(repoRoot, 'deploy', file), 'utf8')).map((doc) => {
    expect(doc.errors).toEqual([]);
    return doc.toJSON();
  });
const rbac = load('rbac.yaml');
const admission = load('admission-policy.yaml');
const SYSTEM_NAMESPACE = 'preview-system';

const byKind = (docs: Json[], kind: string) => docs.filter((d) => d.kind === kind);
/** A role's rules as `group/resource verb`, sorted (the core group as ``). */
const rightsOf = (role: Json): string[] =>
  role.rules
    .flatMap((rule: Json) =>
      rule.apiGroups.flatMap((group: string) =>
        rule.resources.flatMap((resource: string) =>
          rule.verbs.map((verb: string) => `${group}/${resource} ${verb}`),
        ),
      ),
    )
    .sort();
const sorted = (values: Iterable<string>) => [...new Set(values)].sort();
const rights = (lines: Record<string, string[]>) =>
  sorted(Object.entries(lines).flatMap(([resource, verbs]) => verbs.map((verb) => `${resource} ${verb}`)));

/** Cluster-wide: the preview namespaces and the objects of their apps. */
const clusterRights = rights({
  '/namespaces': ['get', 'create', 'patch', 'delete'],
  '/secrets': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  '/services': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  '/resourcequotas': ['get', 'create', 'update', 'patch'],
  '/pods': ['list'],
  '/pods/log': ['get'],
  'apps/deployments': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'networking.k8s.io/ingresses': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'networking.k8s.io/networkpolicies': ['get', 'create', 'update', 'patch'],
  // The optional engines' kinds (eks/engines.ts): the front door's objects (eks/door/).
  'gateway.networking.k8s.io/httproutes': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'gateway.networking.k8s.io/referencegrants': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'gateway.envoyproxy.io/securitypolicies': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'gateway.envoyproxy.io/backends': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'http.keda.sh/interceptorroutes': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  'keda.sh/scaledobjects': ['get', 'list', 'create', 'update', 'patch', 'delete'],
  // preview.yaml services: CloudNativePG's Clusters, the seed and migrate Jobs (eks/services/).
  'postgresql.cnpg.io/clusters': ['get', 'list', 'create', 'delete'],
  'batch/jobs': ['get', 'create'],
  // What earlier versions wrote, only removed.
  'http.keda.sh/httpscaledobjects': ['list', 'delete'],
});
/** In preview-system only: the teardown fences. */
const fenceRights = rights({ '/configmaps': ['get', 'list', 'create', 'update', 'delete'] });

describe('deploy/rbac.yaml', () => {
  const clusterRole = byKind(rbac, 'ClusterRole');
  const role = byKind(rbac, 'Role');

  test('holds the namespace, a ClusterRole and a Role with their bindings, nothing else', () => {
    expect(
      rbac.map((d) => `${d.apiVersion} ${d.kind} ${d.metadata.namespace ?? ''}/${d.metadata.name}`),
    ).toEqual([
      `v1 Namespace /${SYSTEM_NAMESPACE}`,
      'rbac.authorization.k8s.io/v1 ClusterRole /preview-runtime',
      'rbac.authorization.k8s.io/v1 ClusterRoleBinding /preview-runtime',
      `rbac.authorization.k8s.io/v1 Role ${SYSTEM_NAMESPACE}/preview-runtime-fences`,
      `rbac.authorization.k8s.io/v1 RoleBinding ${SYSTEM_NAMESPACE}/preview-runtime-fences`,
    ]);
    // The fences' namespace carries the label the runtime (and the admission policy) recognise it by.
    expect(rbac[0].metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': MANAGED_BY });
  });

  test('the ClusterRole grants exactly the runtime’s rights on namespaces and app objects', () => {
    expect(rightsOf(clusterRole[0])).toEqual(clusterRights);
  });

  test('ConfigMaps only in preview-system (cluster-wide, that would include kube-system/aws-auth)', () => {
    expect(rightsOf(role[0])).toEqual(fenceRights);
    expect(rightsOf(clusterRole[0]).some((r) => r.includes('configmaps'))).toBe(false);
  });

  test('no wildcard, no resourceNames, no escalation rights (bind, escalate, impersonate, RBAC objects)', () => {
    const rules = [...clusterRole, ...role].flatMap((r) => r.rules);
    const text = JSON.stringify(rules);
    expect(text).not.toContain('*');
    expect(rules.every((r: Json) => r.resourceNames === undefined && r.nonResourceURLs === undefined)).toBe(
      true,
    );
    expect(text).not.toMatch(/bind|escalate|impersonate|rbac|serviceaccounts|nodes|token/);
  });

  test.each([
    ['ClusterRoleBinding', 'ClusterRole', 'preview-runtime'],
    ['RoleBinding', 'Role', 'preview-runtime-fences'],
  ])('the %s gives its %s to the group of the access entries, and only to it', (kind, roleKind, name) => {
    const [binding] = byKind(rbac, kind);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name });
    expect(binding.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: clusterGroup },
    ]);
  });
});

describe('deploy/admission-policy.yaml', () => {
  const [policy] = byKind(admission, 'ValidatingAdmissionPolicy');
  const [binding] = byKind(admission, 'ValidatingAdmissionPolicyBinding');

  test('a GA policy, bound to deny, applying to the runtime’s group only', () => {
    expect(admission).toHaveLength(2);
    expect(policy.apiVersion).toBe('admissionregistration.k8s.io/v1');
    expect(policy.spec.failurePolicy).toBe('Fail');
    expect(policy.spec.matchConditions).toEqual([
      { name: expect.any(String), expression: `'${clusterGroup}' in request.userInfo.groups` },
    ]);
    expect(binding.spec).toEqual({ policyName: policy.metadata.name, validationActions: ['Deny'] });
  });

  test('covers every write the ClusterRole allows, on every resource it allows writing', () => {
    const matched = policy.spec.matchConstraints.resourceRules.flatMap((rule: Json) => {
      expect(sorted(rule.operations)).toEqual(['CREATE', 'DELETE', 'UPDATE']);
      return rule.apiGroups.flatMap((g: string) => rule.resources.map((r: string) => `${g}/${r}`));
    });
    const written = [...clusterRights, ...fenceRights]
      .filter((r) => !/ (get|list)$/.test(r))
      .map((r) => r.split(' ')[0]!);
    for (const resource of new Set(written)) expect(matched).toContain(resource);
  });

  test('checks the managed-by label on namespaces (old and new) and on the namespace of everything else', () => {
    const text = JSON.stringify(policy.spec);
    expect(text).toContain(`'app.kubernetes.io/managed-by'] == '${MANAGED_BY}'`);
    const expressions = policy.spec.validations.map((v: Json) => v.expression as string);
    expect(
      expressions.some(
        (e: string) => e.includes('variables.oldManaged') && e.includes('variables.newManaged'),
      ),
    ).toBe(true);
    expect(expressions).toContain(
      'variables.isNamespace || variables.inManagedNamespace || variables.ownGrant',
    );
    for (const v of policy.spec.validations) expect(v.message.length).toBeGreaterThan(20);
  });
});

describe('what the EKS runtime really calls', () => {
  const REGION = 'eu-west-1';
  const CLUSTER = 'previews';
  const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
  const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
  const IMAGE2 = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'b'.repeat(64)}`;
  const WEB: AppSpec = { port: 3000, health: '/healthz' };
  const API: AppSpec = { port: 4000 };
  let kube: FakeKubernetes;
  let aws: FakeEksAndLambda;
  const outcomes = new Map<string, TaskOutcome>();
  const watches: Promise<unknown>[] = [];

  beforeAll(async () => {
    setLogSink(() => undefined);
    kube = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION },
      autoAdvanceMs: 20,
    }).start();
    aws = await new FakeEksAndLambda(REGION).addCluster(CLUSTER, kube).start();
  });
  afterAll(async () => {
    await Promise.allSettled(watches);
    await aws?.stop();
    await kube?.stop();
  });

  const cluster = (over: Partial<ConstructorParameters<typeof EksCluster>[0]> = {}) => {
    const c: EksCluster = new EksCluster({
      clusterName: CLUSTER,
      region: REGION,
      routing: 'gateway',
      gateway: { name: 'previews', namespace: 'envoy-gateway-system' },
      protection: 'envoy-security-policy',
      verifierUrl: 'https://abc123.lambda-url.eu-west-1.on.aws/',
      domain: 'previews.example.com',
      complete: async (token, outcome) => void outcomes.set(token, outcome),
      api: { endpoint: kube.url, caData: kube.caData },
      credentials: async () => CREDENTIALS,
      invokeWatcher: async (event) => void watches.push(c.watch(event)),
      timing: { pollMs: 25, readyTimeoutMs: 20_000, teardownWaitMs: 10_000, namespaceWaitMs: 5_000 },
      ...over,
    });
    return c;
  };
  const launch = (name: string, spec: AppSpec, secret: string, image?: string): AppLaunch => ({
    name,
    spec,
    vars: { TOKEN: secret },
    secretKeys: ['TOKEN'],
    ...(image ? { image } : {}),
  });
  let tokens = 0;
  async function awaitReady(c: EksCluster, t: RuntimeTarget, apps: Record<string, AppSpec>) {
    const token = `token-${++tokens}`;
    await c.awaitReady(t, apps, token);
    const end = Date.now() + 20_000;
    while (!outcomes.has(token) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    return outcomes.get(token);
  }

  /** A request of the fake's log (`METHOD /path [patch type]`) as the RBAC right it needs, and where. */
  function rightOf(request: string): { right: string; namespace?: string } {
    const [method, path] = request.split(' ') as [string, string];
    const parts = path.split('/').filter(Boolean);
    const [group, rest] = parts[0] === 'api' ? ['', parts.slice(2)] : [parts[1]!, parts.slice(3)];
    let resource: string;
    let name: string | undefined;
    let namespace: string | undefined;
    if (rest.length <= 2) [resource, name] = [rest[0]!, rest[1]];
    else {
      namespace = rest[1];
      resource = rest[2]!;
      name = rest[3];
      if (rest[4]) resource = `${resource}/${rest[4]}`;
    }
    const verb =
      method === 'GET'
        ? name
          ? 'get'
          : 'list'
        : method === 'DELETE'
          ? name
            ? 'delete'
            : 'deletecollection'
          : ({ POST: 'create', PUT: 'update', PATCH: 'patch' } as Record<string, string>)[method]!;
    return { right: `${group}/${resource} ${verb}`, namespace };
  }

  test('a whole lifecycle makes only calls the RBAC grants, and uses every right it grants', async () => {
    // Act: deploy two apps and wait for them; restart one with a new secret; rebuild it; drop the other
    // (prune); change every object's content (another cluster configuration, another port); let a rollout
    // fail (its logs are read, masked with its Secret); tear down; deploy again (the stale fence is
    // removed) and tear down again (a new fence), and again (the fence raised); prune the fences (the
    // expiry sweep).
    const c = cluster();
    const t: RuntimeTarget = {
      orgId: 'org-rbac',
      envKey: 'acme/shop#1',
      repoFullName: 'acme/shop',
      prNumber: 1,
      generation: 1,
    };
    const at = (generation: number) => ({ ...t, generation });
    const ns = c.namespaceOf(t);
    await c.deploy(
      at(1),
      [launch('web', WEB, 'first-secret-value', IMAGE), launch('api', API, 'first-secret-value', IMAGE)],
      { prune: true, frontDoor: { access: 'protected', sleepAfterMs: 60_000 } },
    );
    expect(await awaitReady(c, at(1), { web: WEB, api: API })).toMatchObject({ ok: true });
    await c.deploy(at(2), [launch('web', WEB, 'second-secret-value')], { restart: true });
    expect(await awaitReady(c, at(2), { web: WEB, api: API })).toMatchObject({ ok: true });
    // Sleep and wake: the InterceptorRoutes and ScaledObjects replaced, re-stamped, pruned.
    const sleepy = { frontDoor: { access: 'protected' as const, sleepAfterMs: 120_000 } };
    await c.deploy(at(3), [launch('web', WEB, 'second-secret-value', IMAGE2)], sleepy);
    expect(await awaitReady(c, at(3), { web: WEB, api: API })).toMatchObject({ ok: true });
    await c.deploy(at(4), [launch('web', WEB, 'second-secret-value', IMAGE2)], { prune: true, ...sleepy });
    // The Gateway, the verifier, KEDA's interceptor and the domain moved, another application's key: every
    // front-door object replaced (update); then public and awake: the verifier's Backend goes (delete).
    const moved = cluster({
      gateway: { name: 'previews', namespace: 'envoy-gateway-system', sectionName: 'https' },
      verifierUrl: 'https://def456.lambda-url.eu-west-1.on.aws/',
      keda: { interceptorService: 'keda-add-ons-http-interceptor-proxy-2' },
      domain: 'previews2.example.com',
    });
    await moved.deploy(at(5), [launch('web', WEB, 'second-secret-value', IMAGE2)], {
      prune: true,
      frontDoor: { ...sleepy.frontDoor, applicationId: 'app-2' },
    });
    await moved.deploy(at(6), [launch('web', WEB, 'second-secret-value', IMAGE2)], {
      prune: true,
      frontDoor: { access: 'public', sleepAfterMs: 0 },
    });
    // The Ingress path (an explicit choice): the Gateway's objects go, an Ingress per app.
    const changed = cluster({
      routing: 'ingress',
      ingressClassName: 'alb',
      protection: 'none',
      ingressAnnotations: { 'alb.ingress.kubernetes.io/scheme': 'internal' },
      allowFromCidrs: ['10.0.0.0/16'],
      quota: { pods: '10' },
    });
    await changed.deploy(at(7), [launch('web', { port: 8080 }, 'second-secret-value', IMAGE2)], {
      prune: true,
    });
    expect(await awaitReady(changed, at(7), { web: { port: 8080 } })).toMatchObject({ ok: true });
    // Another class's annotations: each Ingress replaced (update).
    const annotated = cluster({
      routing: 'ingress',
      ingressClassName: 'alb',
      protection: 'none',
      ingressAnnotations: { 'alb.ingress.kubernetes.io/scheme': 'internet-facing' },
      allowFromCidrs: ['10.0.0.0/16'],
      quota: { pods: '10' },
    });
    await annotated.deploy(at(8), [launch('web', { port: 8080 }, 'second-secret-value', IMAGE2)], {
      prune: true,
    });
    kube.inject(ns, 'web', 'CrashLoopBackOff');
    kube.setLogs(ns, 'web', ['starting', 'token third-secret-value rejected']);
    await annotated.deploy(at(9), [launch('web', { port: 8080 }, 'third-secret-value', IMAGE)], {
      prune: true,
    });
    const failed = await awaitReady(changed, at(9), { web: { port: 8080 } });
    expect(failed).toMatchObject({ ok: false, error: 'DeployFailed' });
    expect(JSON.stringify(failed)).toContain('last output: starting | token [secret] rejected');
    expect(JSON.stringify(failed)).not.toContain('third-secret-value');
    // Services (another preview): a Cluster and Redis, a migrate and a seed Job run before the app
    // starts; then neither declared any more (their objects deleted).
    const withDb: RuntimeTarget = { ...t, envKey: 'acme/shop#2', prNumber: 2 };
    const svcApp: AppSpec = { port: 4000, env: { DB: '$' + '{services.db.url}' }, migrate: 'node m.js' };
    const services = [
      {
        name: 'db',
        spec: { kind: 'postgres' as const, version: '16', seed: 'node s.js', seedApp: 'api' },
        user: 'preview',
        password: 'db-password-value',
      },
      {
        name: 'cache',
        spec: { kind: 'redis' as const, version: '7', seedApp: 'api' },
        user: 'preview',
        password: 'cache-password-value',
      },
    ];
    await c.deploy(withDb, [launch('api', svcApp, 'first-secret-value', IMAGE)], { prune: true, services });
    expect(await awaitReady(c, withDb, { api: svcApp })).toMatchObject({ ok: true });
    await c.deploy({ ...withDb, generation: 2 }, [launch('api', API, 'first-secret-value', IMAGE)], {
      prune: true,
    });
    // The app-logs route reads the same way: pods list, the app's Secret, pods/log.
    const read = await changed.logs(at(9), 'web', { source: 'app', tailLines: 10, maxBytes: 65_536 });
    expect(read?.text).toContain('token [secret] rejected');
    await changed.teardown(at(10));
    await changed.deploy(at(11), [launch('web', { port: 8080 }, 'third-secret-value', IMAGE)], {
      prune: true,
    });
    await changed.teardown(at(12));
    // A teardown with nothing to remove raises the fence (update).
    await changed.teardown(at(13));
    // The expiry sweep's part: fences whose namespace is gone, past the cutoff, go (list, delete).
    expect(await changed.pruneFences(new Date(Date.now() + 60_000))).toEqual({ removed: 1 });
    await Promise.allSettled(watches);

    // Assess: every request is granted (configmaps only in preview-system) ...
    const used = kube.requests.map(rightOf);
    const refused = used.filter(
      ({ right, namespace }) =>
        !clusterRights.includes(right) && !(namespace === SYSTEM_NAMESPACE && fenceRights.includes(right)),
    );
    expect(refused).toEqual([]);
    // ... and every granted right was needed.
    expect(sorted(used.map((u) => u.right))).toEqual(sorted([...clusterRights, ...fenceRights]));
  }, 60_000);
});
