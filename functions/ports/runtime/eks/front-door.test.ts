import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeKubernetes } from '../../../../test/cloud/fakes/kubernetes.js';
import { setLogSink } from '../../../shared/log.js';
import type { AppLaunch, AppSpec, FrontDoorSettings, RuntimeTarget } from '../port.js';
import { EksCluster } from './cluster.js';
import { hostOf, namespaceName } from './objects.js';

/*
 * The EKS front door (front-door.ts) against the loopback fake Kubernetes API with the real
 * @kubernetes/client-node: the HTTPScaledObject (a CRD, through CustomObjectsApi), the Ingress routed to
 * KEDA's interceptor, the ingress-nginx external-auth annotations, and what goes when sleep is switched off
 * or the environment is torn down.
 */

const REGION = 'eu-west-1';
const CLUSTER = 'previews';
const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
const DOMAIN = 'preview.example.com';
const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
const VERIFIER = 'https://abc123.lambda-url.eu-west-1.on.aws/';
const WEB: AppSpec = { port: 3000 };

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
const cluster = (fake = kube, verifierUrl: string | undefined = VERIFIER) =>
  new EksCluster({
    clusterName: CLUSTER,
    region: REGION,
    ingressClassName: 'nginx',
    domain: DOMAIN,
    api: { endpoint: fake.url, caData: fake.caData },
    credentials: async () => CREDENTIALS,
    invokeWatcher: async () => undefined,
    ...(verifierUrl ? { verifierUrl } : {}),
    timing: { pollMs: 25, readyTimeoutMs: 5_000, teardownWaitMs: 10_000, namespaceWaitMs: 5_000 },
  });
const door = (over: Partial<FrontDoorSettings> = {}): FrontDoorSettings => ({
  access: 'protected',
  sleepAfterMs: 30 * 60_000,
  applicationId: 'app-1',
  ...over,
});

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

describe('EKS front door', () => {
  test('a sleeping, protected app: HTTPScaledObject, Ingress to the interceptor, auth annotations', async () => {
    pr++;
    const t = target();
    const ns = namespaceName(t);
    await cluster().deploy(t, [launch('web')], { prune: true, frontDoor: door({ sleepAfterMs: 90_000 }) });

    const hso = kube.get('httpscaledobjects', ns, 'web')!;
    expect(hso.apiVersion).toBe('http.keda.sh/v1alpha1');
    expect(hso.spec).toEqual({
      hosts: [hostOf(ns, 'web', DOMAIN)],
      scaleTargetRef: { name: 'web', kind: 'Deployment', apiVersion: 'apps/v1', service: 'web', port: 80 },
      replicas: { min: 0, max: 1 },
      scaledownPeriod: 90,
    });
    const proxy = kube.get('services', ns, 'preview-interceptor')!;
    expect(proxy.spec).toMatchObject({
      type: 'ExternalName',
      externalName: 'keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local',
    });
    const ingress = kube.get('ingresses', ns, 'web')!;
    expect(ingress.spec.rules[0].host).toBe(hostOf(ns, 'web', DOMAIN));
    expect(ingress.spec.rules[0].http.paths[0].backend.service).toEqual({
      name: 'preview-interceptor',
      port: { number: 8080 },
    });
    const a = ingress.metadata.annotations;
    const authUrl = new URL(a['nginx.ingress.kubernetes.io/auth-url']);
    expect(authUrl.origin).toBe(new URL(VERIFIER).origin);
    expect(Object.fromEntries(authUrl.searchParams)).toEqual({
      org: 'org-door',
      env: t.envKey,
      app: 'app-1',
    });
    expect(a['nginx.ingress.kubernetes.io/auth-cache-key']).toBe('$host$cookie_preview_access$arg_token');
    expect(a['nginx.ingress.kubernetes.io/auth-cache-duration']).toBe('200 202 60s');
    expect(a['nginx.ingress.kubernetes.io/auth-always-set-cookie']).toBe('true');
    // KEDA's interceptor may reach the pods.
    const np = kube.get('networkpolicies', ns, 'preview-isolation')!;
    expect(JSON.stringify(np.spec.ingress[0].from)).toContain('"kubernetes.io/metadata.name":"keda"');
  });

  test("a protected app's link path: an Ingress of its own to the verifier's function URL, with the same auth", async () => {
    pr++;
    const t = target();
    const ns = namespaceName(t);
    const c = cluster();
    await c.deploy(t, [launch('web')], { prune: true, frontDoor: door({ sleepAfterMs: 90_000 }) });
    const verifier = kube.get('services', ns, 'preview-access-verifier')!;
    expect(verifier.spec).toMatchObject({
      type: 'ExternalName',
      externalName: 'abc123.lambda-url.eu-west-1.on.aws',
      ports: [{ name: 'https', port: 443, protocol: 'TCP' }],
    });
    const app = kube.get('ingresses', ns, 'web')!;
    const access = kube.get('ingresses', ns, 'web.access')!;
    expect(access.metadata.labels).toEqual(app.metadata.labels);
    expect(access.spec.ingressClassName).toBe('nginx');
    expect(access.spec.tls).toEqual(app.spec.tls);
    expect(access.spec.rules).toEqual([
      {
        host: hostOf(ns, 'web', DOMAIN),
        http: {
          paths: [
            {
              path: '/__preview/access',
              pathType: 'Exact',
              backend: { service: { name: 'preview-access-verifier', port: { number: 443 } } },
            },
          ],
        },
      },
    ]);
    const a = access.metadata.annotations;
    const p = 'nginx.ingress.kubernetes.io/';
    // The same external auth as the app's (a valid link passes, its Set-Cookie added to the redirect).
    for (const k of [
      'auth-url',
      'auth-method',
      'auth-always-set-cookie',
      'auth-cache-key',
      'auth-cache-duration',
    ])
      expect(a[`${p}${k}`]).toBe(app.metadata.annotations[`${p}${k}`]);
    expect(a[`${p}backend-protocol`]).toBe('HTTPS');
    expect(a[`${p}upstream-vhost`]).toBe('abc123.lambda-url.eu-west-1.on.aws');
    expect(a[`${p}proxy-ssl-server-name`]).toBe('on');
    expect(a[`${p}proxy-ssl-name`]).toBe('abc123.lambda-url.eu-west-1.on.aws');

    // Public: that Ingress goes; the app's stays, without auth.
    await c.deploy(target(2), [launch('web')], { prune: true, frontDoor: door({ access: 'public' }) });
    expect(kube.get('ingresses', ns, 'web.access')).toBeUndefined();
    expect(kube.get('ingresses', ns, 'web')).toBeDefined();
    // Protected again, then the app removed: pruned with it.
    await c.deploy(target(3), [launch('web'), launch('api')], { prune: true, frontDoor: door() });
    expect(kube.get('ingresses', ns, 'api.access')).toBeDefined();
    await c.deploy(target(4), [launch('web')], { prune: true, frontDoor: door() });
    expect(
      kube
        .list('ingresses', ns)
        .map((i) => i.metadata.name)
        .sort(),
    ).toEqual(['web', 'web.access']);
  });

  test('protected without a verifier URL: no access Ingress, no verifier Service', async () => {
    pr++;
    const t = target();
    const ns = namespaceName(t);
    await cluster(kube, '').deploy(t, [launch('web')], { prune: true, frontDoor: door() });
    expect(kube.get('ingresses', ns, 'web.access')).toBeUndefined();
    expect(kube.get('services', ns, 'preview-access-verifier')).toBeUndefined();
  });

  test('public and never sleeping: the plain Ingress to the Service, no HTTPScaledObject (and it goes)', async () => {
    pr++;
    const t = target();
    const ns = namespaceName(t);
    const c = cluster();
    await c.deploy(t, [launch('web')], { prune: true, frontDoor: door() });
    expect(kube.get('httpscaledobjects', ns, 'web')).toBeDefined();

    await c.deploy(target(2), [launch('web')], {
      prune: true,
      frontDoor: door({ access: 'public', sleepAfterMs: 0 }),
    });
    expect(kube.get('httpscaledobjects', ns, 'web')).toBeUndefined();
    const ingress = kube.get('ingresses', ns, 'web')!;
    expect(ingress.spec.rules[0].http.paths[0].backend.service.name).toBe('web');
    expect(Object.keys(ingress.metadata.annotations).filter((k) => k.includes('auth-'))).toEqual([]);
  });

  test('a removed app’s HTTPScaledObject is pruned; teardown takes the namespace with it', async () => {
    pr++;
    const c = cluster();
    const ns = namespaceName(target());
    await c.deploy(target(1), [launch('web'), launch('api')], { prune: true, frontDoor: door() });
    expect(
      kube
        .list('httpscaledobjects', ns)
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['api', 'web']);
    await c.deploy(target(2), [launch('web')], { prune: true, frontDoor: door() });
    expect(kube.list('httpscaledobjects', ns).map((o) => o.metadata.name)).toEqual(['web']);
    await c.teardown(target(3));
    expect(kube.list('httpscaledobjects', ns)).toEqual([]);
  });

  test('a cluster without KEDA’s HTTP add-on: the deploy fails naming the resource', async () => {
    const bare = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION },
      crds: [],
    }).start();
    try {
      pr++;
      await expect(
        cluster(bare).deploy(target(), [launch('web')], { prune: true, frontDoor: door() }),
      ).rejects.toThrow(/httpScaledObjects/);
    } finally {
      await bare.stop();
    }
  });
});
