import { EKSClient } from '@aws-sdk/client-eks';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import {
  FakeKubernetes,
  type FaultReason,
  tokenProblem,
} from '../../../../test/cloud/fakes/kubernetes/index.js';
import { FakeEksAndLambda } from '../../../../test/cloud/fakes/kubernetes-aws.js';
import { parseEksConfig } from '../../../shared/config.js';
import { setLogSink } from '../../../shared/log.js';
import { MASK } from '../../../shared/masking/mask.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../port.js';
import { EksTokens, eksToken } from './auth.js';
import { EksCluster, type EksClusterOptions, eksClusterOf, type RolloutWatchEvent } from './cluster.js';
import { connectionOptions } from './connection.js';
import { describeCluster } from './describe.js';
import { fitName, hostOf, internalUrl, namespaceName, OBJECT_DEFAULTS, objectName } from './objects.js';
import { rolloutState } from './rollout.js';

/*
 * The EKS cluster adapter against the loopback fake Kubernetes API (test/cloud/fakes/kubernetes/) with
 * the real @kubernetes/client-node, found through a fake eks:DescribeCluster, authenticated with a real
 * STS-presigned token that the fake verifies (SigV4 recomputed with these test credentials). The rollout
 * watcher runs in-process (an injected invoker), except in the test of its self re-invocation, which goes
 * through the default Lambda invoker (a real LambdaClient) against a fake Lambda Invoke.
 *
 * The Runtime contract (runtime.contract.ts) takes a whole Runtime, build included, and two of its four
 * tests are about the build half (a build fences generations; a build of a missing source fails), which
 * this adapter doesn't do (CodeBuildImages does). Its two cluster tests are below in cluster terms:
 * "deploy then awaitReady completes with a URL per app" and "teardown is idempotent and fences the
 * generations before it", plus "a deploy of an older generation is refused".
 */

const REGION = 'eu-west-1';
const CLUSTER = 'previews';
const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
const DOMAIN = 'preview.example.com';
const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
const IMAGE2 = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'b'.repeat(64)}`;
const SECRET = 'hunter2-very-secret-value';
const TICK_MS = 20;

const WEB: AppSpec = { port: 3000, health: '/healthz', env: { MODE: 'web' } };
const API: AppSpec = { port: 4000 };

let kube: FakeKubernetes;
let aws: FakeEksAndLambda;
const outcomes = new Map<string, TaskOutcome>();
const waiters = new Map<string, (o: TaskOutcome) => void>();
const watchers: Promise<unknown>[] = [];
let tokenSeq = 0;
let pr = 100;

async function complete(token: string, outcome: TaskOutcome) {
  if (outcomes.has(token)) return; // a task completes once
  outcomes.set(token, outcome);
  waiters.get(token)?.(outcome);
}
function outcomeOf(token: string, ms = 20_000): Promise<TaskOutcome> {
  const done = outcomes.get(token);
  if (done) return Promise.resolve(done);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`token ${token} not completed within ${ms} ms`)), ms);
    waiters.set(token, (o) => {
      clearTimeout(timer);
      resolve(o);
    });
  });
}
const newToken = () => `token-${++tokenSeq}`;
const target = (generation = 1, over: Partial<RuntimeTarget> = {}): RuntimeTarget => ({
  orgId: 'org-eks',
  envKey: `acme/shop#${pr}`,
  repoFullName: 'acme/shop',
  prNumber: pr,
  generation,
  ...over,
});
const at = (t: RuntimeTarget, generation: number) => ({ ...t, generation });
function launch(name: string, spec: AppSpec, secret = SECRET, image: string | undefined = IMAGE): AppLaunch {
  return {
    name,
    spec,
    vars: { ...spec.env, DATABASE_PASSWORD: secret },
    secretKeys: ['DATABASE_PASSWORD'],
    ...(image ? { image } : {}),
  };
}

function cluster(over: Partial<EksClusterOptions> = {}): EksCluster {
  const c: EksCluster = new EksCluster({
    clusterName: CLUSTER,
    region: REGION,
    // The Ingress path (an explicit choice), as this file's objects are asserted; the Gateway path and the
    // front door's objects: door/front-door.test.ts.
    routing: 'ingress',
    ingressClassName: 'nginx',
    ingressNamespace: 'ingress-nginx',
    domain: DOMAIN,
    complete,
    api: { endpoint: kube.url, caData: kube.caData },
    credentials: async () => CREDENTIALS,
    invokeWatcher: async (event) => {
      watchers.push(c.watch(event));
    },
    timing: { pollMs: 25, readyTimeoutMs: 20_000, teardownWaitMs: 10_000, namespaceWaitMs: 5_000 },
    ...over,
  });
  return c;
}

async function ready(c: EksCluster, t: RuntimeTarget, apps: Record<string, AppSpec>) {
  const token = newToken();
  await c.awaitReady(t, apps, token);
  return outcomeOf(token);
}

/** Every object of a namespace as `resource/name@resourceVersion`. */
function snapshot(ns: string): string[] {
  return ['secrets', 'deployments', 'services', 'ingresses', 'resourcequotas', 'networkpolicies']
    .flatMap((r) => kube.list(r, ns).map((o) => `${r}/${o.metadata.name}@${o.metadata.resourceVersion}`))
    .sort();
}
const template = (ns: string, app: string) => kube.get('deployments', ns, app)?.spec.template;
/** Wait until `done()` holds (polling), at most `ms`. */
async function until(done: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

beforeAll(async () => {
  setLogSink(() => undefined);
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  kube = await new FakeKubernetes({
    auth: { clusterName: CLUSTER, region: REGION, verify: CREDENTIALS },
    autoAdvanceMs: TICK_MS,
  }).start();
  aws = await new FakeEksAndLambda(REGION).addCluster(CLUSTER, kube).start();
});

afterAll(async () => {
  await Promise.allSettled(watchers);
  await aws?.stop();
  await kube?.stop();
});

describe('names', () => {
  const longest = {
    orgId: 'org-x',
    repoFullName: `${'o'.repeat(39)}/${'r'.repeat(100)}`,
    prNumber: 2147483647,
  };

  test('a namespace name is a DNS label of at most 63 characters for the longest names GitHub allows', () => {
    const ns = namespaceName(longest);
    expect(ns.length).toBeLessThanOrEqual(63);
    expect(ns).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(ns).toMatch(/^pv-o{10}-r{27}-2147483647-[0-9a-f]{10}$/);
    expect(namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/shop` })).toMatch(
      /^pv-o{33}-shop-2147483647-[0-9a-f]{10}$/,
    );
    expect(namespaceName({ orgId: 'o', repoFullName: 'Acme.Corp/My_Repo', prNumber: 7 })).toMatch(
      /^pv-acme-corp-my-repo-7-[0-9a-f]{10}$/,
    );
  });

  test('two names sharing a long prefix, or differing in org or PR only, get different namespaces', () => {
    const a = namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/${'r'.repeat(99)}a` });
    const b = namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/${'r'.repeat(99)}b` });
    expect(a).not.toBe(b);
    expect(a.slice(0, 50)).toBe(b.slice(0, 50));
    expect(namespaceName({ ...longest, orgId: 'org-y' })).not.toBe(namespaceName(longest));
    expect(namespaceName({ ...longest, prNumber: 1 })).not.toBe(namespaceName(longest));
    // GitHub's names are case-insensitive: so is the namespace.
    expect(namespaceName({ ...longest, repoFullName: longest.repoFullName.toUpperCase() })).toBe(
      namespaceName(longest),
    );
  });

  test('hosts stay one DNS label under the domain; object names are valid Service names', () => {
    const ns = namespaceName(longest);
    const host = hostOf(ns, 'a'.repeat(63), DOMAIN);
    expect(host.endsWith(`.${DOMAIN}`)).toBe(true);
    expect(host.split('.')[0]!.length).toBeLessThanOrEqual(63);
    expect(hostOf(ns, 'a'.repeat(63), DOMAIN)).not.toBe(hostOf(ns, `${'a'.repeat(62)}b`, DOMAIN));
    expect(hostOf('pv-acme-shop-1-0123456789', 'web', DOMAIN)).toBe(
      `web-pv-acme-shop-1-0123456789.${DOMAIN}`,
    );
    expect(objectName('web')).toBe('web');
    expect(objectName('2fa')).toMatch(/^a[0-9a-f]{6}-2fa$/);
    expect(fitName('x'.repeat(80)).length).toBe(63);
    expect(internalUrl({ orgId: 'o', repoFullName: 'acme/shop', prNumber: 3 }, 'api')).toBe(
      `http://api.${namespaceName({ orgId: 'o', repoFullName: 'acme/shop', prNumber: 3 })}.svc.cluster.local`,
    );
  });
});

describe('cluster access', () => {
  test('a token is k8s-aws-v1. + base64url of a presigned GetCallerIdentity URL bound to the cluster', async () => {
    const token = await eksToken({ clusterName: CLUSTER, region: REGION, credentials: CREDENTIALS });
    expect(token).toMatch(/^k8s-aws-v1\.[A-Za-z0-9_-]+$/);
    const url = new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString());
    expect(url.host).toBe(`sts.${REGION}.amazonaws.com`);
    expect(url.searchParams.get('Action')).toBe('GetCallerIdentity');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('60');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');
    const check = { clusterName: CLUSTER, region: REGION, verify: CREDENTIALS };
    expect(tokenProblem(`Bearer ${token}`, check)).toBeUndefined();
    expect(tokenProblem(`Bearer ${token}`, { ...check, clusterName: 'another' })).toMatch(/signature/);
    expect(
      tokenProblem(`Bearer ${token}`, { ...check, verify: { ...CREDENTIALS, secretAccessKey: 'other' } }),
    ).toMatch(/signature/);
  });

  test('tokens are cached and signed again after 10 minutes', async () => {
    let now = Date.now();
    let signed = 0;
    const tokens = new EksTokens({
      clusterName: CLUSTER,
      region: REGION,
      credentials: async () => {
        signed++;
        return CREDENTIALS;
      },
      now: () => now,
    });
    const first = await tokens.get();
    now += 9 * 60_000;
    expect(await tokens.get()).toBe(first);
    now += 2 * 60_000;
    const second = await tokens.get();
    expect(second).not.toBe(first);
    expect(signed).toBe(2);
  });
});

// Each test drives the real @kubernetes/client-node against a loopback fake: seconds on a busy machine.
jest.setTimeout(30_000);

describe('EksCluster', () => {
  test('deploy writes the namespace and each app’s objects, shaped as documented', async () => {
    pr++;
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
    pr++;
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
    pr++;
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
    pr++;
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
    pr++;
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
    pr++;
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

  test('a deploy or teardown of an older generation is refused with Superseded and changes nothing', async () => {
    pr++;
    const c = cluster();
    const t = target(2);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    kube.autoAdvance(0);
    try {
      const before = snapshot(ns);
      await expect(
        c.deploy(at(t, 1), [launch('web', WEB, 'old', IMAGE2)], { prune: true }),
      ).rejects.toMatchObject({
        name: 'Superseded',
      });
      await expect(c.deploy(at(t, 1), [launch('web', WEB, 'old')], { restart: true })).rejects.toMatchObject({
        name: 'Superseded',
      });
      await expect(c.teardown(at(t, 1))).rejects.toMatchObject({ name: 'Superseded' });
      expect(snapshot(ns)).toEqual(before);
      expect(kube.get('namespaces', '', ns)!.metadata.deletionTimestamp).toBeUndefined();
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('teardown deletes the namespace (foreground), resolves once it is gone, is idempotent, and fences', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    await c.teardown(at(t, 2));
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
    expect(kube.requests).toContain(`DELETE /api/v1/namespaces/${ns}`);
    await c.teardown(at(t, 2));
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
    // A newer deploy (the PR reopened) brings it back.
    await c.deploy(at(t, 3), [launch('web', WEB)], { prune: true });
    expect(kube.get('namespaces', '', ns)!.metadata.annotations['preview-control-plane/generation']).toBe(
      '3',
    );
    await c.teardown(at(t, 4));
  });

  test('teardown of an environment never deployed fences it too', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    await c.teardown(at(t, 2));
    await c.teardown(at(t, 2));
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    expect(kube.get('namespaces', '', namespaceName(t))).toBeUndefined();
  });

  test('a newer generation creating the namespace again removes the stale fence: its annotation fences', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    const fence = () => kube.get('configmaps', 'preview-system', `fence-${ns}`);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    await c.teardown(at(t, 2));
    expect(fence()?.metadata.annotations['preview-control-plane/generation']).toBe('2');
    await c.deploy(at(t, 3), [launch('web', WEB)], { prune: true });
    expect(fence()).toBeUndefined();
    expect(kube.requests).toContain(`DELETE /api/v1/namespaces/preview-system/configmaps/fence-${ns}`);
    // Older generations are still refused, by the namespace now.
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    await expect(c.teardown(at(t, 2))).rejects.toMatchObject({ name: 'Superseded' });
    // The next teardown fences again.
    await c.teardown(at(t, 4));
    expect(fence()?.metadata.annotations['preview-control-plane/generation']).toBe('4');
    await expect(c.deploy(at(t, 3), [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
  });

  test('a fence removed between the teardown reading it and raising it is written anew', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.teardown(at(t, 2));
    // The sweep (or a newer generation) removes the fence just as the next teardown replaces it.
    kube.beforeNext(`PUT /api/v1/namespaces/preview-system/configmaps/fence-${ns}`, () =>
      kube.drop('configmaps', 'preview-system', `fence-${ns}`),
    );
    await c.teardown(at(t, 3));
    expect(
      kube.get('configmaps', 'preview-system', `fence-${ns}`)?.metadata.annotations[
        'preview-control-plane/generation'
      ],
    ).toBe('3');
    await expect(c.deploy(at(t, 2), [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
  });

  test('pruneFences removes the fences past the cutoff whose namespace is gone, and only those', async () => {
    const c = cluster();
    // A torn-down environment (its fence now), one still running with an old fence, one long gone.
    pr++;
    const recent = target(1);
    await c.teardown(at(recent, 2));
    pr++;
    const running = target(1);
    await c.deploy(running, [launch('web', WEB)], { prune: true });
    const old = '2020-01-01T00:00:00.000Z';
    const seedFence = (namespace: string, data: Record<string, string> = { tornDownAt: old }) =>
      kube.seed('configmaps', 'preview-system', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: `fence-${namespace}`,
          labels: { 'app.kubernetes.io/managed-by': 'preview-control-plane' },
          annotations: { 'preview-control-plane/generation': '1' },
        },
        data: { namespace, ...data },
      });
    seedFence(namespaceName(running));
    seedFence('p-gone-long-ago');
    // Someone else's ConfigMap in the system namespace is not a fence.
    kube.seed('configmaps', 'preview-system', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'operator-notes',
        labels: { 'app.kubernetes.io/managed-by': 'preview-control-plane' },
      },
      data: { tornDownAt: old },
    });
    const names = () => kube.list('configmaps', 'preview-system').map((o) => o.metadata.name);
    const cutoff = new Date(Date.now() - 3600_000);

    expect(await c.pruneFences(cutoff)).toEqual({ removed: 1 });
    expect(names()).not.toContain('fence-p-gone-long-ago');
    expect(names()).toEqual(
      expect.arrayContaining([
        `fence-${namespaceName(recent)}`, // newer than the cutoff
        `fence-${namespaceName(running)}`, // its namespace exists
        'operator-notes',
      ]),
    );
    // The recent fence still refuses its older generations; past its time, it goes too.
    await expect(c.deploy(recent, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    // (with the fences the tests above left, their namespaces gone too)
    expect((await c.pruneFences(new Date(Date.now() + 60_000))).removed).toBeGreaterThanOrEqual(1);
    expect(names()).not.toContain(`fence-${namespaceName(recent)}`);
    expect(names()).toContain(`fence-${namespaceName(running)}`);
    await c.teardown(at(running, 2));
  });

  test('teardown during a rollout wins: the waiting token ends Superseded', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    kube.autoAdvance(0);
    let tearing: Promise<void> | undefined;
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const token = newToken();
      await c.awaitReady(t, { web: WEB }, token);
      tearing = c.teardown(at(t, 2));
      const outcome = await outcomeOf(token);
      expect(outcome).toMatchObject({ ok: false, error: 'Superseded' });
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    await tearing;
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
  });

  test('a newer deploy supersedes the watch of an older one', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const token = newToken();
      await c.awaitReady(t, { web: WEB }, token);
      await c.deploy(at(t, 2), [launch('web', WEB, SECRET, IMAGE2)]);
      expect(await outcomeOf(token)).toMatchObject({ ok: false, error: 'Superseded' });
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  const failures: [FaultReason, RegExp, boolean][] = [
    ['CrashLoopBackOff', /back-off 40s restarting failed container/, true],
    ['ImagePullBackOff', /Back-off pulling image/, false],
    ['ErrImagePull', /failed to pull and unpack image/, false],
    ['CreateContainerConfigError', /couldn't find key/, false],
    ['ProgressDeadlineExceeded', /has timed out progressing/, true],
  ];
  test.each(failures)(
    '%s fails the token with DeployFailed naming the app, the cause and masked logs',
    async (reason, message, logs) => {
      pr++;
      const c = cluster();
      const t = target(1);
      const ns = namespaceName(t);
      kube.setLogs(ns, 'api', ['booting', `connecting with password ${SECRET}`, 'fatal: cannot connect']);
      kube.inject(ns, 'api', reason);
      await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
      const outcome = await ready(c, t, { web: WEB, api: API });
      expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
      const cause = (outcome as { cause: string }).cause;
      // A log that names a cause (`fatal: …`) leads the message; else what the pod waits for does.
      expect(cause).toMatch(new RegExp(`^${logs ? 'fatal: cannot connect \\(' : ''}app api: ${reason} \\(`));
      expect(cause).toMatch(/; full log: previewctl envs logs api --repo [^ ]+ --pr \d+$/);
      expect(cause).toMatch(message);
      expect(cause).not.toContain(SECRET);
      expect(cause).not.toMatch(/app web/);
      expect(cause).not.toContain('last output');
      kube.clear(ns, 'api');
    },
  );

  test('a missing secret bundle is a CreateContainerConfigError from the controller itself', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    kube.autoAdvance(0);
    try {
      // Simulate the Secret going missing (deleted by hand) and a restart of the pods.
      await c.deploy(at(t, 2), [launch('web', WEB)], { restart: true });
      const secret = kube.get('secrets', ns, 'web')!;
      kube.drop('secrets', ns, 'web');
      const outcome = ready(c, at(t, 2), { web: WEB });
      kube.autoAdvance(TICK_MS);
      expect(await outcome).toMatchObject({
        ok: false,
        error: 'DeployFailed',
        cause: expect.stringContaining('app web: CreateContainerConfigError (secret "web" not found)'),
      });
      expect(secret).toBeDefined();
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('a rollout that is not ready by the deadline fails with what was pending', async () => {
    pr++;
    const c = cluster({ timing: { pollMs: 25, readyTimeoutMs: 1000 } });
    const t = target(1);
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const outcome = await ready(c, t, { web: WEB });
      expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
      expect((outcome as { cause: string }).cause).toMatch(
        /^not ready within 1 s: web: waiting for the controller/,
      );
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('the watcher invokes itself (Lambda, InvocationType Event) after its slice, until the rollout is ready', async () => {
    pr++;
    const events: RolloutWatchEvent[] = [];
    const c = cluster({
      invokeWatcher: undefined,
      lambda: new LambdaClient({ region: REGION, endpoint: aws.url, credentials: CREDENTIALS }),
      watcherFunction: `arn:aws:lambda:${REGION}:000000000000:function:rollout-watcher`,
      timing: { pollMs: 25, sliceMs: 100, readyTimeoutMs: 20_000 },
    });
    aws.addFunction('rollout-watcher', async (event) => {
      events.push(event as RolloutWatchEvent);
      return c.watch(event as RolloutWatchEvent);
    });
    const t = target(1);
    kube.autoAdvance(0);
    const token = newToken();
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      await c.awaitReady(t, { web: WEB }, token);
      await until(() => events.length >= 3);
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    expect(await outcomeOf(token)).toMatchObject({ ok: true, output: { urls: { web: expect.any(String) } } });
    await aws.settled();
    expect(events.length).toBeGreaterThanOrEqual(3);
    expect(events.map((e) => e.hop)).toEqual(events.map((_, i) => i));
    expect(new Set(events.map((e) => e.deadline)).size).toBe(1);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    expect(aws.calls.filter((call) => call === 'Lambda.Invoke rollout-watcher (Event)').length).toBe(
      events.length,
    );
  });

  test('the watcher sends task heartbeats as it waits; a task that no longer waits stops it', async () => {
    pr++;
    const beats: string[] = [];
    const c = cluster({
      heartbeat: async (token) => {
        beats.push(token);
        return undefined;
      },
      timing: { pollMs: 25, heartbeatMs: 60, readyTimeoutMs: 20_000 },
    });
    const t = target(1);
    const token = newToken();
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      await c.awaitReady(t, { web: WEB }, token);
      await until(() => beats.length >= 3);
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    expect(await outcomeOf(token)).toMatchObject({ ok: true });
    expect(beats.length).toBeGreaterThanOrEqual(3);
    expect(new Set(beats)).toEqual(new Set([token]));

    const gone = cluster({ heartbeat: async () => 'gone' as const });
    const lost = newToken();
    const now = Date.now();
    const event = { target: t, apps: ['web'], token: lost, deadline: now + 10_000, hop: 0, startedAt: now };
    expect(await gone.watch(event)).toEqual({ outcome: 'abandoned', hop: 0 });
    expect(outcomes.has(lost)).toBe(false);
  });

  test('a namespace of that name that the service did not create is neither used nor deleted', async () => {
    pr++;
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
    pr++;
    const c = cluster({ api: undefined });
    await expect(c.deploy(target(1), [launch('web', WEB)])).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are not set'),
    });
  });

  test('the CLI looks the cluster API up (eks:DescribeCluster); an unknown cluster is a DeployFailed naming it', async () => {
    pr++;
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

describe('rollout status', () => {
  const d = (status: object, generation = 2) =>
    ({ metadata: { generation }, spec: { replicas: 1 }, status }) as unknown as V1Deployment;
  test('is ready only as kubectl rollout status means it', () => {
    expect(
      rolloutState(d({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 })),
    ).toMatchObject({
      state: 'progressing',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 2 })),
    ).toMatchObject({
      state: 'progressing',
      detail: '1 old replica(s) pending termination',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 0 })),
    ).toMatchObject({
      state: 'progressing',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 })),
    ).toEqual({
      state: 'ready',
    });
  });
});

describe('the rollout watcher Lambda', () => {
  test('refuses an event it cannot read', async () => {
    const { handler } = await import('../../../watchers/rollout.js');
    await expect(handler({ target: {} })).rejects.toMatchObject({ name: 'MalformedEvent' });
  });
});
