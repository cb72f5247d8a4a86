import { EKSClient } from '@aws-sdk/client-eks';
import { describe, expect, test } from '@jest/globals';
import {
  API,
  at,
  aws,
  CLUSTER,
  CREDENTIALS,
  cluster,
  DOMAIN,
  IMAGE,
  IMAGE2,
  kube,
  launch,
  nextPr,
  REGION,
  ready,
  SECRET,
  target,
  template,
  useFakeCluster,
  WEB,
} from '../../../../test/support/eks-cluster.js';
import { parseEksConfig } from '../../../shared/config.js';
import { MASK } from '../../../shared/masking/mask.js';
import type { AppSpec } from '../port.js';
import { EksCluster, eksClusterOf } from './cluster.js';
import { connectionOptions } from './connection.js';
import { describeCluster } from './describe.js';
import { internalUrl, namespaceName, OBJECT_DEFAULTS } from './objects.js';

/*
 * The EKS cluster adapter (cluster.ts) against the loopback fake Kubernetes API with the real
 * @kubernetes/client-node (test/support/eks-cluster.ts): the objects a deploy writes, sibling references,
 * logs, restart, rebuild and prune, stopping the apps, a namespace it did not create, and where the cluster
 * API comes from. Generations, teardown and fences: cluster-fences.test.ts; the rollout and its watcher:
 * cluster-rollout.test.ts; names: objects.test.ts; tokens: auth.test.ts.
 *
 * The Runtime contract (runtime.contract.ts) takes a whole Runtime, build included, and two of its four
 * tests are about the build half (a build fences generations; a build of a missing source fails), which
 * this adapter doesn't do (CodeBuildImages does). Its two cluster tests are here and in
 * cluster-fences.test.ts in cluster terms: "deploy then awaitReady completes with a URL per app" and
 * "teardown is idempotent and fences the generations before it", plus "a deploy of an older generation is
 * refused".
 */

useFakeCluster();

describe('EksCluster', () => {
  test('deploy writes the namespace and each app’s objects, shaped as documented', async () => {
    const pr = nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });

    const namespace = kube.get('namespaces', '', ns)!;
    expect(namespace.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'preview-control-plane',
      'preview-control-plane/org': 'org-eks',
      'preview-control-plane/repo': 'acme-shop',
      'preview-control-plane/pr': String(pr),
    });
    expect(namespace.metadata.annotations).toMatchObject({
      'preview-control-plane/repository': 'acme/shop',
      'preview-control-plane/generation': '1',
    });

    const secret = kube.get('secrets', ns, 'web')!;
    expect(secret.data).toEqual({ DATABASE_PASSWORD: Buffer.from(SECRET).toString('base64') });

    const web = kube.get('deployments', ns, 'web')!;
    expect(web.spec.replicas).toBe(1);
    expect(web.spec.selector.matchLabels).toMatchObject({ app: 'web' });
    const container = web.spec.template.spec.containers[0];
    expect(container.image).toBe(IMAGE);
    expect(container.env).toEqual([
      { name: 'PORT', value: '3000' },
      { name: 'MODE', value: 'web' },
    ]);
    expect(JSON.stringify(web)).not.toContain(SECRET);
    expect(container.envFrom).toEqual([{ secretRef: { name: 'web' } }]);
    expect(container.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.ports).toEqual([{ name: 'http', containerPort: 3000, protocol: 'TCP' }]);
    expect(container.resources).toEqual(OBJECT_DEFAULTS.resources);
    const api = kube.get('deployments', ns, 'api')!;
    expect(api.spec.template.spec.containers[0].readinessProbe.tcpSocket).toEqual({ port: 'http' });

    const service = kube.get('services', ns, 'web')!;
    expect(service.spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 3000, protocol: 'TCP' }]);
    expect(service.spec.selector).toMatchObject({ app: 'web' });

    const ingress = kube.get('ingresses', ns, 'web')!;
    const host = `web-${ns}.${DOMAIN}`;
    expect(ingress.spec.ingressClassName).toBe('nginx');
    expect(ingress.spec.tls).toEqual([{ hosts: [host] }]);
    expect(ingress.spec.rules[0].host).toBe(host);
    expect(ingress.spec.rules[0].http.paths[0].backend).toEqual({
      service: { name: 'web', port: { number: 80 } },
    });

    expect(kube.get('resourcequotas', ns, 'preview-quota')!.spec.hard).toEqual(OBJECT_DEFAULTS.quota);
    const policy = kube.get('networkpolicies', ns, 'preview-isolation')!;
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress).toEqual([
      {
        from: [
          { podSelector: {} },
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
        ],
      },
    ]);
    expect(kube.requests.some((r) => r.startsWith('PATCH') && !r.endsWith('merge-patch+json'))).toBe(false);
  });

  /** A preview.yaml sibling reference, `${apps.<app>.<field>}`. */
  const ref = (app: string, field: string) => `\${apps.${app}.${field}}`;
  test('sibling references resolve to the Service DNS name and the public URL; an unknown app fails naming it', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    const web: AppSpec = {
      ...WEB,
      env: { API_URL: `${ref('api', 'internalUrl')}/v1`, API_PUBLIC: ref('api', 'url') },
    };
    await c.deploy(t, [launch('web', web), launch('api', API)], { apps: ['web', 'api'] });
    const env = kube.get('deployments', ns, 'web')!.spec.template.spec.containers[0].env;
    expect(env).toEqual(
      expect.arrayContaining([
        { name: 'API_URL', value: `${internalUrl(t, 'api')}/v1` },
        { name: 'API_PUBLIC', value: c.urlOf(t, 'api') },
      ]),
    );
    expect(internalUrl(t, 'api')).toBe(`http://api.${ns}.svc.cluster.local`);
    const typo: AppSpec = { ...WEB, env: { API_URL: ref('backend', 'url') } };
    await expect(c.deploy(at(t, 2), [launch('web', typo)], { apps: ['web', 'api'] })).rejects.toMatchObject({
      name: 'DeployFailed',
      message: 'app web: env API_URL references app backend, which preview.yaml does not declare',
    });
  });

  test('deploy then awaitReady completes the token with an https URL per app; a same deploy rolls nothing', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    expect(await ready(c, t, { web: WEB, api: API })).toEqual({
      ok: true,
      output: { urls: { web: `https://web-${ns}.${DOMAIN}`, api: `https://api-${ns}.${DOMAIN}` } },
    });
    const before = kube.get('deployments', ns, 'web')!.metadata.generation;
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    expect(kube.get('deployments', ns, 'web')!.metadata.generation).toBe(before);
  });

  test("logs: a section per pod of the app, its last lines, the app's Secret masked; none before a deploy", async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    const query = { source: 'app' as const, tailLines: 2, maxBytes: 1024 * 1024 };
    expect(await c.logs(t, 'web', query)).toBeUndefined();
    kube.setLogs(ns, 'web', ['booting', `password is ${SECRET}`, 'listening on 3000']);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    expect(await ready(c, t, { web: WEB })).toMatchObject({ ok: true });
    const read = await c.logs(t, 'web', query);
    expect(read?.truncated).toBe(true);
    expect(read?.text).toMatch(
      new RegExp(
        `^--- pod web-[\\w-]+ \\(Running, ready\\) ---\npassword is \\${MASK.slice(0, -1)}\\]\nlistening on 3000\n$`,
      ),
    );
    expect(read?.text).not.toContain(SECRET);
    expect(await c.logs(t, 'api', query)).toBeUndefined();
    // Over maxBytes: the newest lines that fit (limitBytes keeps a tail's first bytes: fewer lines asked).
    const long = Array.from({ length: 100 }, (_, i) => `line ${i} ${'z'.repeat(95)}`);
    kube.setLogs(ns, 'web', long);
    const capped = await c.logs(t, 'web', { ...query, tailLines: 100, maxBytes: 4096 });
    expect(capped?.truncated).toBe(true);
    expect(capped?.text.endsWith(`${long.at(-1)}\n`)).toBe(true);
    expect(Buffer.byteLength(capped!.text)).toBeLessThan(4096 + 200);
    // A build's log is not the cluster's.
    expect(await c.logs(t, 'web', { ...query, source: 'build' })).toBeUndefined();
  });

  test('restart re-syncs that app’s Secret and patches its pod template only; rebuild changes its image only; a whole deploy prunes', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    expect(await ready(c, t, { web: WEB, api: API })).toMatchObject({ ok: true });
    const apiTemplate = template(ns, 'api');
    const apiSecret = kube.get('secrets', ns, 'api')!.metadata.resourceVersion;
    const webImage = template(ns, 'web').spec.containers[0].image;

    // Restart web with a changed secret (no image: a restart keeps the running one).
    await c.deploy(at(t, 2), [launch('web', WEB, 'a-new-secret-value', undefined)], { restart: true });
    const restarted = template(ns, 'web');
    expect(restarted.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toEqual(expect.any(String));
    expect(restarted.spec.containers[0].image).toBe(webImage);
    expect(kube.get('secrets', ns, 'web')!.data.DATABASE_PASSWORD).toBe(
      Buffer.from('a-new-secret-value').toString('base64'),
    );
    expect(template(ns, 'api')).toEqual(apiTemplate);
    expect(kube.get('secrets', ns, 'api')!.metadata.resourceVersion).toBe(apiSecret);
    expect(kube.requests).toContain(
      `PATCH /apis/apps/v1/namespaces/${ns}/deployments/web application/merge-patch+json`,
    );
    expect(await ready(c, at(t, 2), { web: WEB, api: API })).toMatchObject({ ok: true });

    // Rebuild web: its new image only.
    await c.deploy(at(t, 3), [launch('web', WEB, 'a-new-secret-value', IMAGE2)]);
    expect(template(ns, 'web').spec.containers[0].image).toBe(IMAGE2);
    expect(template(ns, 'api')).toEqual(apiTemplate);
    expect(await ready(c, at(t, 3), { web: WEB, api: API })).toMatchObject({ ok: true });

    // A whole redeploy without api: api's objects go, web's stay.
    await c.deploy(at(t, 4), [launch('web', WEB, 'a-new-secret-value', IMAGE2)], { prune: true });
    for (const r of ['deployments', 'services', 'ingresses', 'secrets']) {
      expect([r, kube.get(r, ns, 'api')]).toEqual([r, undefined]);
      expect([r, kube.get(r, ns, 'web') !== undefined]).toEqual([r, true]);
    }
    expect(await ready(c, at(t, 4), { web: WEB })).toMatchObject({ ok: true });
  });

  test('stopApps deletes the Deployments only (fenced); a restart or a deploy creates them again', async () => {
    nextPr();
    const c = cluster();
    const t = target(2);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    expect(await ready(c, t, { web: WEB, api: API })).toMatchObject({ ok: true });
    // An older generation stops nothing.
    await expect(c.stopApps(at(t, 1), 'the environment failed')).rejects.toMatchObject({
      name: 'Superseded',
    });
    expect(kube.get('deployments', ns, 'web')).toBeDefined();

    expect(await c.stopApps(t, 'the environment failed')).toEqual({
      api: 'stopped: the environment failed',
      web: 'stopped: the environment failed',
    });
    for (const app of ['web', 'api']) {
      expect(kube.get('deployments', ns, app)).toBeUndefined();
      for (const r of ['services', 'ingresses', 'secrets'])
        expect([r, kube.get(r, ns, app) !== undefined]).toEqual([r, true]);
    }
    expect(await c.stopApps(t, 'the environment failed')).toEqual({});

    // A restart of web (the image it ran) and a rebuild of api bring their Deployments back.
    await c.deploy(t, [launch('web', WEB, SECRET, IMAGE)], { restart: true });
    await c.deploy(t, [launch('api', API, SECRET, IMAGE2)]);
    expect(template(ns, 'web').spec.containers[0].image).toBe(IMAGE);
    expect(template(ns, 'api').spec.containers[0].image).toBe(IMAGE2);
    expect(await ready(c, t, { web: WEB, api: API })).toMatchObject({ ok: true });
    // No namespace: nothing to stop.
    expect(await c.stopApps(target(1, { prNumber: 99_999, envKey: 'acme/shop#99999' }), 'x')).toEqual({});
  }, 30_000);

  test('a namespace of that name that the service did not create is neither used nor deleted', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    kube.seed('namespaces', '', { metadata: { name: ns } });
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({
      name: 'DeployFailed',
      message: expect.stringContaining('is not managed by preview-control-plane'),
    });
    await expect(c.teardown(at(t, 2))).rejects.toMatchObject({ name: 'DeployFailed' });
    expect(kube.get('namespaces', '', ns)!.metadata.deletionTimestamp).toBeUndefined();
    expect(kube.list('secrets', ns)).toEqual([]);
  });

  test('without the cluster API (EKS_CLUSTER_ENDPOINT, EKS_CLUSTER_CA_DATA) a call is a ConfigError naming them', async () => {
    nextPr();
    const c = cluster({ api: undefined });
    await expect(c.deploy(target(1), [launch('web', WEB)])).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are not set'),
    });
  });

  test('the CLI looks the cluster API up (eks:DescribeCluster); an unknown cluster is a DeployFailed naming it', async () => {
    nextPr();
    const eks = new EKSClient({ region: REGION, endpoint: aws.url, credentials: CREDENTIALS });
    const c = cluster({ api: describeCluster(CLUSTER, REGION, eks) });
    const t = target(1);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    expect(kube.get('namespaces', '', namespaceName(t))).toBeDefined();
    expect(aws.calls).toContain(`EKS.DescribeCluster ${CLUSTER}`);
    const unknown = cluster({ clusterName: 'nope', api: describeCluster('nope', REGION, eks) });
    await expect(unknown.deploy(target(1), [launch('web', WEB)])).rejects.toMatchObject({
      name: 'DeployFailed',
      message: expect.stringContaining('EKS cluster nope not found'),
    });
  });

  test('the cluster from the configuration: its API both variables or neither, an https URL', () => {
    const env = {
      EKS_CLUSTER_NAME: CLUSTER,
      EKS_ROUTING: 'ingress',
      EKS_INGRESS_CLASS: 'nginx',
      EKS_INGRESS_DOMAIN: DOMAIN,
    };
    const of = (vars: NodeJS.ProcessEnv) => eksClusterOf({}, { region: REGION, eks: parseEksConfig(vars) });
    expect(() => of({ ...env, EKS_CLUSTER_ENDPOINT: 'https://x.example' })).toThrow(
      /EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are set together or not at all/,
    );
    expect(() => of({ ...env, EKS_CLUSTER_ENDPOINT: 'x.example', EKS_CLUSTER_CA_DATA: 'Y2E=' })).toThrow(
      /EKS_CLUSTER_ENDPOINT: must be the URL/,
    );
    expect(
      of({ ...env, EKS_CLUSTER_ENDPOINT: 'https://x.example', EKS_CLUSTER_CA_DATA: 'Y2E=' }),
    ).toBeInstanceOf(EksCluster);
    // Required by whoever uses the cluster, each named.
    expect(() => of({ EKS_CLUSTER_NAME: CLUSTER, EKS_INGRESS_CLASS: 'nginx' })).toThrow(
      /^EKS_GATEWAY_NAME is not set/,
    );
    expect(() =>
      of({ EKS_CLUSTER_NAME: CLUSTER, EKS_ROUTING: 'ingress', EKS_INGRESS_CLASS: 'nginx' }),
    ).toThrow(/^EKS_INGRESS_DOMAIN is not set/);
    // Gateway routing (the default): the Gateway named, the protection setting passed on.
    expect(
      connectionOptions({
        region: REGION,
        eks: parseEksConfig({
          EKS_CLUSTER_NAME: CLUSTER,
          EKS_GATEWAY_NAME: 'previews',
          EKS_GATEWAY_NAMESPACE: 'envoy-gateway-system',
          EKS_GATEWAY_SECTION: 'https',
          EKS_PROTECTION: 'envoy-security-policy',
          EKS_INGRESS_DOMAIN: DOMAIN,
        }),
      }),
    ).toMatchObject({
      routing: 'gateway',
      gateway: { name: 'previews', namespace: 'envoy-gateway-system', sectionName: 'https' },
      protection: 'envoy-security-policy',
    });
    expect(() => parseEksConfig({ ...env, EKS_ROUTING: 'nginx', EKS_PROTECTION: 'maybe' })).toThrow(
      /EKS_ROUTING: .*EKS_PROTECTION: /,
    );
    // A default access of protected where protection can't be enforced: refused, naming the setting.
    expect(() =>
      parseEksConfig({
        ...env,
        EKS_ROUTING: 'gateway',
        EKS_PROTECTION: 'none',
        PREVIEW_DEFAULT_ACCESS: 'protected',
      }),
    ).toThrow(/PREVIEW_DEFAULT_ACCESS: cannot be protected: .*protection setting is none/);
    expect(parseEksConfig({ ...env, PREVIEW_DEFAULT_ACCESS: 'public' })).toMatchObject({
      defaultAccess: 'public',
    });
    // Validated with the rest of the configuration: every bad variable named at once.
    expect(() =>
      parseEksConfig({
        ...env,
        EKS_INGRESS_ANNOTATIONS: '{"a": 1}',
        EKS_ALLOW_FROM_CIDRS: '10.0.0.0/8, everywhere',
      }),
    ).toThrow(
      'invalid configuration: EKS_INGRESS_ANNOTATIONS: must be a JSON object of strings; EKS_ALLOW_FROM_CIDRS: ' +
        'must be comma-separated CIDR blocks (10.0.0.0/8,fd00::/8)',
    );
    expect(
      parseEksConfig({
        ...env,
        EKS_INGRESS_ANNOTATIONS: '{"alb.ingress.kubernetes.io/scheme":"internal"}',
        EKS_ALLOW_FROM_CIDRS: '10.0.0.0/8, fd00::/8',
      }),
    ).toMatchObject({
      ingressAnnotations: { 'alb.ingress.kubernetes.io/scheme': 'internal' },
      allowFromCidrs: ['10.0.0.0/8', 'fd00::/8'],
    });
  });
});
