import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeKubernetes } from '../../../../../test/cloud/fakes/kubernetes/index.js';
import { verifyPath } from '../../../../shared/access-token.js';
import { setLogSink } from '../../../../shared/log.js';
import type { AppLaunch, AppSpec, FrontDoorSettings, RuntimeTarget } from '../../port.js';
import { EksCluster, type EksClusterOptions } from '../cluster.js';
import { hostOf, namespaceName } from '../objects.js';

/*
 * The EKS front door (door/front-door.ts) against the loopback fake Kubernetes API with the real
 * @kubernetes/client-node, the fake checking each CRD's required fields: per app an HTTPRoute on the
 * operator's Gateway, KEDA's InterceptorRoute and ScaledObject while it sleeps (the route's backend the
 * interceptor, granted by a ReferenceGrant in KEDA's namespace), Envoy Gateway's SecurityPolicy or the
 * ExternalAuth filter when protected; the Ingress path; what goes when a setting is switched off, when an
 * app is removed, when the environment is torn down; and what earlier versions wrote, removed.
 */

const REGION = 'eu-west-1';
const CLUSTER = 'previews';
const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
const DOMAIN = 'preview.example.com';
const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
const VERIFIER = 'https://abc123.lambda-url.eu-west-1.on.aws/';
const WEB: AppSpec = { port: 3000 };
const GATEWAY = { name: 'previews', namespace: 'envoy-gateway-system', sectionName: 'https' };

let kube: FakeKubernetes;
let pr = 500;

const launch = (name: string): AppLaunch => ({ name, spec: WEB, vars: {}, secretKeys: [], image: IMAGE });
const target = (generation = 1): RuntimeTarget => ({
  orgId: 'org-door',
  envKey: `acme/shop#${pr}`,
  repoFullName: 'acme/shop',
  prNumber: pr,
  generation,
});
const cluster = (fake = kube, over: Partial<EksClusterOptions> = {}) =>
  new EksCluster({
    clusterName: CLUSTER,
    region: REGION,
    routing: 'gateway',
    gateway: GATEWAY,
    protection: 'envoy-security-policy',
    domain: DOMAIN,
    api: { endpoint: fake.url, caData: fake.caData },
    credentials: async () => CREDENTIALS,
    invokeWatcher: async () => undefined,
    verifierUrl: VERIFIER,
    timing: { pollMs: 25, readyTimeoutMs: 5_000, teardownWaitMs: 10_000, namespaceWaitMs: 5_000 },
    ...over,
  });
const door = (over: Partial<FrontDoorSettings> = {}): FrontDoorSettings => ({
  access: 'protected',
  sleepAfterMs: 30 * 60_000,
  applicationId: 'app-1',
  ...over,
});
const names = (resource: string, ns: string, fake = kube) =>
  fake
    .list(resource, ns)
    .map((o) => o.metadata.name as string)
    .sort();

beforeAll(async () => {
  setLogSink(() => undefined);
  kube = await new FakeKubernetes({
    auth: { clusterName: CLUSTER, region: REGION },
    autoAdvanceMs: 20,
  }).start();
});
afterAll(async () => {
  await kube?.stop();
});

describe('EKS front door on the Gateway API', () => {
  test('sleeping and protected: HTTPRoute to the interceptor, ReferenceGrant, InterceptorRoute, ScaledObject, SecurityPolicy', async () => {
    pr++;
    const t = target();
    const ns = namespaceName(t);
    await cluster().deploy(t, [launch('web')], { prune: true, frontDoor: door({ sleepAfterMs: 90_000 }) });
    const host = hostOf(ns, 'web', DOMAIN);

    const route = kube.get('httproutes', ns, 'web')!;
    expect(route.apiVersion).toBe('gateway.networking.k8s.io/v1');
    expect(route.spec.parentRefs).toEqual([
      { group: 'gateway.networking.k8s.io', kind: 'Gateway', ...GATEWAY },
    ]);
    expect(route.spec.hostnames).toEqual([host]);
    const interceptor = {
      group: '',
      kind: 'Service',
      name: 'keda-add-ons-http-interceptor-proxy',
      namespace: 'keda',
      port: 8080,
    };
    // The access link's path has a rule of its own, before everything else.
    expect(route.spec.rules).toEqual([
      { matches: [{ path: { type: 'Exact', value: '/__preview/access' } }], backendRefs: [interceptor] },
      { matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: [interceptor] },
    ]);
    const grant = kube.get('referencegrants', 'keda', `from-${ns}`)!;
    expect(grant.spec).toEqual({
      from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: ns }],
      to: [{ group: '', kind: 'Service', name: 'keda-add-ons-http-interceptor-proxy' }],
    });

    const ir = kube.get('interceptorroutes', ns, 'web')!;
    expect(ir.apiVersion).toBe('http.keda.sh/v1beta1');
    expect(ir.spec).toEqual({
      target: { service: 'web', port: 80 },
      rules: [{ hosts: [host] }],
      scalingMetric: { concurrency: { targetValue: 100 } },
      timeouts: { readiness: '120s' },
    });
    const so = kube.get('scaledobjects', ns, 'web')!;
    expect(so.apiVersion).toBe('keda.sh/v1alpha1');
    expect(so.spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
      minReplicaCount: 0,
      maxReplicaCount: 1,
      cooldownPeriod: 90,
      advanced: { restoreToOriginalReplicaCount: true },
      triggers: [
        {
          type: 'external-push',
          metadata: { interceptorRoute: 'web', scalerAddress: 'keda-add-ons-http-external-scaler.keda:9090' },
        },
      ],
    });

    const policy = kube.get('securitypolicies', ns, 'web')!;
    expect(policy.spec).toEqual({
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' }],
      extAuth: {
        http: {
          backendRefs: [
            { group: 'gateway.envoyproxy.io', kind: 'Backend', name: 'preview-access-verifier', port: 443 },
          ],
          path: verifyPath({ orgId: 'org-door', envKey: t.envKey, applicationId: 'app-1' }),
        },
        headersToExtAuth: ['cookie', 'x-forwarded-proto'],
      },
    });
    expect(kube.get('backends', ns, 'preview-access-verifier')!.spec).toEqual({
      endpoints: [{ fqdn: { hostname: 'abc123.lambda-url.eu-west-1.on.aws', port: 443 } }],
      tls: { sni: 'abc123.lambda-url.eu-west-1.on.aws', wellKnownCACertificates: 'System' },
    });
    // No Ingress, no HTTPScaledObject, no annotation of a retired controller.
    expect(kube.list('ingresses', ns)).toEqual([]);
    expect(kube.list('httpscaledobjects', ns)).toEqual([]);
    expect(JSON.stringify(kube.list('httproutes', ns))).not.toContain('nginx');
    // KEDA's interceptor and the Gateway's proxies may reach the pods.
    const np = JSON.stringify(kube.get('networkpolicies', ns, 'preview-isolation')!.spec.ingress[0].from);
    expect(np).toContain('"kubernetes.io/metadata.name":"keda"');
    expect(np).toContain('"kubernetes.io/metadata.name":"envoy-gateway-system"');
  });

  test('public and awake: the route to the Service; the sleep and protection objects go, nothing left behind', async () => {
    pr++;
    const ns = namespaceName(target());
    const c = cluster();
    await c.deploy(target(1), [launch('web')], { prune: true, frontDoor: door() });
    expect(names('scaledobjects', ns)).toEqual(['web']);
    await c.deploy(target(2), [launch('web')], {
      prune: true,
      frontDoor: door({ access: 'public', sleepAfterMs: 0 }),
    });
    const route = kube.get('httproutes', ns, 'web')!;
    expect(route.spec.rules).toEqual([
      {
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
        backendRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }],
      },
    ]);
    for (const kind of ['scaledobjects', 'interceptorroutes', 'securitypolicies', 'backends'])
      expect([kind, kube.list(kind, ns)]).toEqual([kind, []]);
    expect(kube.get('referencegrants', 'keda', `from-${ns}`)).toBeUndefined();
    expect(names('services', ns)).toEqual(['web']);
  });

  test('the ExternalAuth filter: refused by the standard CRD, accepted by the experimental one', async () => {
    const standard = cluster(kube, { protection: 'gateway-external-auth' });
    pr++;
    await expect(
      standard.deploy(target(), [launch('web')], { prune: true, frontDoor: door() }),
    ).rejects.toThrow(/Unsupported value: "ExternalAuth"/);
    const experimental = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION },
      gatewayChannel: 'experimental',
    }).start();
    try {
      pr++;
      const t = target();
      const ns = namespaceName(t);
      await cluster(experimental, { protection: 'gateway-external-auth' }).deploy(t, [launch('web')], {
        prune: true,
        frontDoor: door({ sleepAfterMs: 0 }),
      });
      const route = experimental.get('httproutes', ns, 'web')!;
      const filter = {
        type: 'ExternalAuth',
        externalAuth: {
          protocol: 'HTTP',
          backendRef: { group: '', kind: 'Service', name: 'preview-access-verifier', port: 443 },
          http: {
            path: verifyPath({ orgId: 'org-door', envKey: t.envKey, applicationId: 'app-1' }),
            allowedHeaders: ['cookie', 'x-forwarded-proto'],
          },
        },
      };
      expect(route.spec.rules.map((r: { filters: unknown }) => r.filters)).toEqual([[filter], [filter]]);
      expect(experimental.get('services', ns, 'preview-access-verifier')!.spec).toMatchObject({
        type: 'ExternalName',
        externalName: 'abc123.lambda-url.eu-west-1.on.aws',
      });
      expect(experimental.list('securitypolicies', ns)).toEqual([]);
    } finally {
      await experimental.stop();
    }
  });

  test('protection that cannot be enforced: a protected preview fails its deploy, saying why; nothing is written', async () => {
    for (const over of [
      { protection: 'none' as const },
      { routing: 'ingress' as const, ingressClassName: 'alb' },
    ]) {
      pr++;
      const t = target();
      await expect(
        cluster(kube, over).deploy(t, [launch('web')], { prune: true, frontDoor: door() }),
      ).rejects.toThrow(
        /this preview is protected, but protection (cannot be enforced on this cluster: the stack's protection setting is none|needs Gateway routing)/,
      );
      expect(kube.get('namespaces', '', namespaceName(t))).toBeUndefined();
    }
  });

  test('a removed app’s objects are pruned; teardown takes the namespace and the ReferenceGrant', async () => {
    pr++;
    const c = cluster();
    const ns = namespaceName(target());
    await c.deploy(target(1), [launch('web'), launch('api')], { prune: true, frontDoor: door() });
    for (const kind of ['httproutes', 'securitypolicies', 'interceptorroutes', 'scaledobjects'])
      expect([kind, names(kind, ns)]).toEqual([kind, ['api', 'web']]);
    await c.deploy(target(2), [launch('web')], { prune: true, frontDoor: door() });
    for (const kind of ['httproutes', 'securitypolicies', 'interceptorroutes', 'scaledobjects'])
      expect([kind, names(kind, ns)]).toEqual([kind, ['web']]);
    await c.teardown(target(3));
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
    expect(kube.get('referencegrants', 'keda', `from-${ns}`)).toBeUndefined();
  });
});

describe('EKS front door through an Ingress (the explicit choice)', () => {
  test('sleeping: the Ingress to the interceptor stand-in, no annotation of ingress-nginx; awake again: the stand-in goes', async () => {
    pr++;
    const ns = namespaceName(target());
    const c = cluster(kube, {
      routing: 'ingress',
      ingressClassName: 'alb',
      gateway: undefined,
      protection: 'none',
    });
    await c.deploy(target(1), [launch('web')], { prune: true, frontDoor: door({ access: 'public' }) });
    const ingress = kube.get('ingresses', ns, 'web')!;
    expect(ingress.spec.ingressClassName).toBe('alb');
    expect(ingress.spec.rules[0].http.paths[0].backend.service).toEqual({
      name: 'preview-interceptor',
      port: { number: 8080 },
    });
    expect(JSON.stringify(ingress.metadata.annotations)).not.toContain('nginx');
    expect(names('scaledobjects', ns)).toEqual(['web']);
    expect(kube.list('httproutes', ns)).toEqual([]);
    await c.deploy(target(2), [launch('web')], {
      prune: true,
      frontDoor: door({ access: 'public', sleepAfterMs: 0 }),
    });
    expect(names('services', ns)).toEqual(['web']);
    expect(kube.get('ingresses', ns, 'web')!.spec.rules[0].http.paths[0].backend.service.name).toBe('web');
  });
});

describe('upgrading from the Ingress and HTTPScaledObject objects', () => {
  test('the next deploy moves a preview to the new objects and leaves nothing of the old ones', async () => {
    pr++;
    const t = target(1);
    const ns = namespaceName(t);
    // What an earlier version wrote: deployed through the Ingress path, then the old kinds seeded beside it.
    const old = cluster(kube, { routing: 'ingress', ingressClassName: 'nginx', protection: 'none' });
    await old.deploy(t, [launch('web')], { prune: true, frontDoor: door({ access: 'public' }) });
    const meta = (name: string) => ({
      name,
      namespace: ns,
      labels: { 'app.kubernetes.io/managed-by': 'preview-control-plane', app: 'web' },
    });
    kube.seed('httpscaledobjects', ns, {
      apiVersion: 'http.keda.sh/v1alpha1',
      kind: 'HTTPScaledObject',
      metadata: meta('web'),
      spec: { hosts: [hostOf(ns, 'web', DOMAIN)], scaleTargetRef: { name: 'web', service: 'web', port: 80 } },
    });
    kube.seed('ingresses', ns, {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'Ingress',
      metadata: meta('web.access'),
      spec: {},
    });
    kube.seed('services', ns, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'preview-access-verifier', namespace: ns },
      spec: { type: 'ExternalName', externalName: 'abc123.lambda-url.eu-west-1.on.aws' },
    });

    await cluster().deploy(target(2), [launch('web')], { prune: true, frontDoor: door() });
    expect(kube.list('ingresses', ns)).toEqual([]);
    expect(kube.list('httpscaledobjects', ns)).toEqual([]);
    expect(names('services', ns)).toEqual(['web']);
    expect(names('httproutes', ns)).toEqual(['web']);
    expect(names('scaledobjects', ns)).toEqual(['web']);
    expect(names('securitypolicies', ns)).toEqual(['web']);
  });
});

describe('optional engines', () => {
  const without = async (groups: string[], run: (fake: FakeKubernetes) => Promise<void>) => {
    const fake = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION },
      without: groups,
    }).start();
    try {
      await run(fake);
    } finally {
      await fake.stop();
    }
  };

  test('without KEDA: a never-sleeping preview deploys (and prunes); a sleeping one fails naming KEDA and how to install it', async () => {
    await without(['keda.sh'], async (fake) => {
      pr++;
      const c = cluster(fake);
      const ns = namespaceName(target());
      await c.deploy(target(1), [launch('web'), launch('api')], {
        prune: true,
        frontDoor: door({ sleepAfterMs: 0 }),
      });
      await c.deploy(target(2), [launch('web')], { prune: true, frontDoor: door({ sleepAfterMs: 0 }) });
      expect(names('httproutes', ns, fake)).toEqual(['web']);
      pr++;
      const t = target();
      await expect(c.deploy(t, [launch('web')], { prune: true, frontDoor: door() })).rejects.toThrow(
        /sleeping \(the application's sleepAfterMinutes\) needs KEDA with its HTTP add-on.*not installed.*helm install keda/,
      );
      expect(fake.get('namespaces', '', namespaceName(t))).toBeUndefined();
    });
  });

  test('without the Gateway API: Ingress routing deploys; Gateway routing fails naming the Gateway API', async () => {
    await without(['gateway.networking.k8s.io', 'gateway.envoyproxy.io'], async (fake) => {
      pr++;
      const ingress = cluster(fake, { routing: 'ingress', ingressClassName: 'alb', protection: 'none' });
      await ingress.deploy(target(1), [launch('web')], {
        prune: true,
        frontDoor: door({ access: 'public' }),
      });
      expect(names('ingresses', namespaceName(target()), fake)).toEqual(['web']);
      pr++;
      await expect(
        cluster(fake).deploy(target(), [launch('web')], {
          prune: true,
          frontDoor: door({ access: 'public' }),
        }),
      ).rejects.toThrow(/Gateway routing .* needs the Gateway API CRDs .*kubectl apply/);
    });
  });

  test('without Envoy Gateway: a public preview deploys; a protected one fails naming Envoy Gateway', async () => {
    await without(['gateway.envoyproxy.io'], async (fake) => {
      pr++;
      await cluster(fake).deploy(target(1), [launch('web')], {
        prune: true,
        frontDoor: door({ access: 'public' }),
      });
      pr++;
      await expect(
        cluster(fake).deploy(target(), [launch('web')], { prune: true, frontDoor: door() }),
      ).rejects.toThrow(/protection \(envoy-security-policy\) needs Envoy Gateway/);
    });
  });
});
