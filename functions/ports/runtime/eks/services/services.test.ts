import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeKubernetes } from '../../../../../test/cloud/fakes/kubernetes/index.js';
import { setLogSink } from '../../../../shared/log.js';
import type { TaskOutcome } from '../../../workflows/port.js';
import type { AppLaunch, AppSpec, RuntimeTarget, ServiceLaunch } from '../../port.js';
import { EksCluster } from '../cluster.js';
import { namespaceName } from '../objects.js';
import { SETUP_NAME } from './services.js';

/*
 * preview.yaml services on the cluster (eks/services/), through EksCluster's deploy and rollout watch
 * against the loopback fake Kubernetes API (test/cloud/fakes/kubernetes/: CloudNativePG's Cluster checked
 * against its CRD's required fields, Jobs that succeed or fail as a test says) with the real client-node.
 */

const REGION = 'eu-west-1';
const CLUSTER = 'previews';
const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
const IMAGE2 = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'b'.repeat(64)}`;
const PASSWORD = 'pg-password-0123456789abcdef';
const REDIS_PASSWORD = 'redis-password-0123456789abcd';
const SECRET = 'app-secret-value-xyz';

/** `${services.<name>.url}`, as preview.yaml writes it. */
const ref = (name: string) => `\${services.${name}.url}`;

const API: AppSpec = {
  port: 4000,
  env: { DATABASE_URL: ref('db'), CACHE_URL: ref('cache') },
  migrate: 'node migrate.js',
};

let kube: FakeKubernetes;
const outcomes = new Map<string, (o: TaskOutcome) => void>();
const watchers: Promise<unknown>[] = [];
let pr = 500;
let tokens = 0;

function cluster(fake = kube, timing: { readyTimeoutMs?: number } = {}): EksCluster {
  const c: EksCluster = new EksCluster({
    clusterName: CLUSTER,
    region: REGION,
    routing: 'ingress',
    ingressClassName: 'nginx',
    domain: 'preview.example.com',
    api: { endpoint: fake.url, caData: fake.caData },
    credentials: async () => CREDENTIALS,
    services: { storageSize: '2Gi', storageClass: 'gp3' },
    complete: async (token, outcome) => outcomes.get(token)?.(outcome),
    invokeWatcher: async (event) => {
      watchers.push(c.watch(event));
    },
    timing: { pollMs: 25, readyTimeoutMs: timing.readyTimeoutMs ?? 20_000, teardownWaitMs: 10_000 },
  });
  return c;
}
const target = (generation = 1, prNumber = pr): RuntimeTarget => ({
  orgId: 'org-svc',
  envKey: `acme/shop#${prNumber}`,
  repoFullName: 'acme/shop',
  prNumber,
  generation,
});
function launch(name: string, spec: AppSpec, image = IMAGE): AppLaunch {
  return { name, spec, vars: { ...spec.env, TOKEN: SECRET }, secretKeys: ['TOKEN'], image };
}
const db = (over: Partial<ServiceLaunch['spec']> = {}): ServiceLaunch => ({
  name: 'db',
  spec: { kind: 'postgres', version: '16', seedApp: 'api', seed: 'node seed.js', ...over },
  user: 'preview',
  password: PASSWORD,
});
const cache: ServiceLaunch = {
  name: 'cache',
  spec: { kind: 'redis', version: '7', seedApp: 'api' },
  user: 'preview',
  password: REDIS_PASSWORD,
};
async function ready(c: EksCluster, t: RuntimeTarget, apps: Record<string, AppSpec>): Promise<TaskOutcome> {
  const token = `svc-${++tokens}`;
  const done = new Promise<TaskOutcome>((resolve) => outcomes.set(token, resolve));
  await c.awaitReady(t, apps, token);
  return done;
}
const jobs = (ns: string) => kube.history.filter((h) => h.startsWith('job') && h.includes(`${ns}/`));

beforeAll(async () => {
  setLogSink(() => undefined);
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  kube = await new FakeKubernetes({
    auth: { clusterName: CLUSTER, region: REGION },
    autoAdvanceMs: 20,
  }).start();
});
afterAll(async () => {
  await Promise.allSettled(watchers);
  await kube?.stop();
});

describe('services on EKS', () => {
  test('a Cluster and Redis are created, the URLs reach the app by secretKeyRef, migrate then seed run before the app starts', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('api', API)], { prune: true, services: [db(), cache] });

    const pg = kube.get('clusters', ns, 'db')!;
    expect([pg.apiVersion, pg.kind]).toEqual(['postgresql.cnpg.io/v1', 'Cluster']);
    expect(pg.spec).toMatchObject({
      instances: 1,
      imageName: 'ghcr.io/cloudnative-pg/postgresql:16',
      storage: { size: '2Gi', storageClass: 'gp3' },
      bootstrap: { initdb: { database: 'app', owner: 'preview', secret: { name: 'db-credentials' } } },
    });
    expect(pg.spec.bootstrap.initdb.import).toBeUndefined();
    const creds = kube.get('secrets', ns, 'db-credentials')!;
    expect(creds.type).toBe('kubernetes.io/basic-auth');
    expect(Buffer.from(creds.data.password, 'base64').toString()).toBe(PASSWORD);
    expect(kube.get('deployments', ns, 'cache')!.spec.template.spec.containers[0].image).toBe('redis:7');
    expect(kube.get('services', ns, 'cache')!.spec.ports[0].port).toBe(6379);
    // The operator's namespace is admitted (it must reach the instance).
    expect(JSON.stringify(kube.get('networkpolicies', ns, 'preview-isolation'))).toContain('cnpg-system');

    // Held until its Jobs ran; no password anywhere in the Deployment: a secretKeyRef and $(VAR).
    const d = kube.get('deployments', ns, 'api')!;
    expect(d.spec.replicas).toBe(0);
    const env = d.spec.template.spec.containers[0].env;
    expect(env).toEqual(
      expect.arrayContaining([
        {
          name: 'PREVIEW_SERVICE_DB_PASSWORD',
          valueFrom: { secretKeyRef: { name: 'db-credentials', key: 'password' } },
        },
        {
          name: 'DATABASE_URL',
          value: `postgres://preview:$(PREVIEW_SERVICE_DB_PASSWORD)@db-rw.${ns}.svc.cluster.local:5432/app`,
        },
        {
          name: 'CACHE_URL',
          value: `redis://default:$(PREVIEW_SERVICE_CACHE_PASSWORD)@cache.${ns}.svc.cluster.local:6379/0`,
        },
      ]),
    );
    const names = env.map((e: { name: string }) => e.name);
    expect(names.indexOf('PREVIEW_SERVICE_DB_PASSWORD')).toBeLessThan(names.indexOf('DATABASE_URL'));
    expect(JSON.stringify(d)).not.toContain(PASSWORD);
    expect(JSON.stringify(d)).not.toContain(REDIS_PASSWORD);

    expect(await ready(c, t, { api: API })).toMatchObject({ ok: true });
    const order = kube.history.filter((h) => h.includes(`${ns}/`));
    expect(order.filter((h) => !h.includes('/cache'))).toEqual([
      `job started ${ns}/api-migrate-g1`,
      `job succeeded ${ns}/api-migrate-g1`,
      `job started ${ns}/db-seed-g1`,
      `job succeeded ${ns}/db-seed-g1`,
      `pod ${ns}/api`,
    ]);
    const job = kube.get('jobs', ns, 'api-migrate-g1')!;
    expect(job.spec.template.spec.containers[0]).toMatchObject({
      image: IMAGE,
      command: ['/bin/sh', '-c', 'node migrate.js'],
      envFrom: [{ secretRef: { name: 'api' } }],
    });
    expect(JSON.stringify(job)).not.toContain(PASSWORD);
    expect(kube.get('deployments', ns, 'api')!.spec.replicas).toBe(1);

    // A redeploy of the same image: no Job; a new image: migrate only (the seed ran once).
    await c.deploy(target(2), [launch('api', API)], { prune: true, services: [db(), cache] });
    expect(kube.get('deployments', ns, 'api')!.spec.replicas).toBe(1);
    expect(await ready(c, target(2), { api: API })).toMatchObject({ ok: true });
    expect(jobs(ns)).toHaveLength(4);
    await c.deploy(target(3), [launch('api', API, IMAGE2)], { prune: true, services: [db(), cache] });
    expect(await ready(c, target(3), { api: API })).toMatchObject({ ok: true });
    expect(jobs(ns).slice(4)).toEqual([
      `job started ${ns}/api-migrate-g3`,
      `job succeeded ${ns}/api-migrate-g3`,
    ]);
    expect(kube.get('clusters', ns, 'db')!.metadata.uid).toBe(pg.metadata.uid);

    // No longer declared: the redis objects and its credentials go; the Cluster stays.
    await c.deploy(target(4), [launch('api', { port: 4000, env: { DATABASE_URL: ref('db') } })], {
      prune: true,
      services: [db()],
    });
    expect(kube.get('deployments', ns, 'cache')).toBeUndefined();
    expect(kube.get('services', ns, 'cache')).toBeUndefined();
    expect(kube.get('secrets', ns, 'cache-credentials')).toBeUndefined();
    expect(kube.get('clusters', ns, 'db')).toBeDefined();

    // Teardown: the namespace goes, and the Cluster (its volume) with it.
    await c.teardown(target(5));
    expect(kube.get('clusters', ns, 'db')).toBeUndefined();
    expect(kube.list('jobs', ns)).toEqual([]);
  }, 60_000);

  test('a failing migrate fails the deploy with its command, exit code and masked output; the app never starts', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    const spec = { ...API, migrate: 'node migrate.js --broken' };
    kube.jobOutcome('node migrate.js --broken', 3, [
      'connecting…',
      `auth as preview:${PASSWORD} with ${SECRET}`,
      'relation "users" already exists',
    ]);
    await c.deploy(t, [launch('api', spec)], { prune: true, services: [db(), cache] });
    const outcome = await ready(c, t, { api: spec });
    expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
    const cause = (outcome as { cause: string }).cause;
    expect(cause).toContain(
      'app api: migrate `node migrate.js --broken` failed (exit code 3); its output ends:',
    );
    expect(cause).toContain('relation "users" already exists');
    expect(cause).toContain('[secret]');
    expect(cause).not.toContain(PASSWORD);
    expect(cause).not.toContain(SECRET);
    expect(kube.history.filter((h) => h === `pod ${ns}/api`)).toEqual([]);
    expect(kube.get('deployments', ns, 'api')!.spec.replicas).toBe(0);
    // The same commit again runs the migrate again (it never succeeded).
    kube.jobOutcome('node migrate.js --broken', 0);
    await c.deploy(target(2), [launch('api', spec)], { prune: true, services: [db(), cache] });
    expect(await ready(c, target(2), { api: spec })).toMatchObject({ ok: true });
    expect(jobs(ns)).toContain(`job succeeded ${ns}/api-migrate-g2`);
  }, 60_000);

  test('from: main imports the main branch environment’s database (microservice import); no seed', async () => {
    pr++;
    const c = cluster();
    const main = target(1, 0);
    const mainNs = namespaceName(main);
    const spec: AppSpec = { port: 4000, env: { DATABASE_URL: ref('db') } };
    await c.deploy(main, [launch('api', spec)], { prune: true, services: [db()] });
    expect(await ready(c, main, { api: spec })).toMatchObject({ ok: true });

    const t = target(1);
    const ns = namespaceName(t);
    const mine = db({ from: 'main' });
    mine.password = 'another-password-for-the-preview';
    await c.deploy(t, [launch('api', spec)], { prune: true, services: [mine] });
    const pg = kube.get('clusters', ns, 'db')!;
    expect(pg.spec.bootstrap.initdb).toMatchObject({
      database: 'app',
      owner: 'preview',
      import: { type: 'microservice', databases: ['app'], source: { externalCluster: 'main' } },
    });
    expect(pg.spec.externalClusters).toEqual([
      {
        name: 'main',
        connectionParameters: expect.objectContaining({
          host: `db-rw.${mainNs}.svc.cluster.local`,
          user: 'preview',
          dbname: 'app',
        }),
        password: { name: 'db-main-credentials', key: 'password' },
      },
    ]);
    expect(kube.get('networkpolicies', mainNs, 'preview-services-import')).toBeDefined();
    expect(await ready(c, t, { api: spec })).toMatchObject({ ok: true });
    // Copied, not seeded; main's credentials removed once the copy is up.
    expect(jobs(ns)).toEqual([]);
    expect(kube.get('secrets', ns, 'db-main-credentials')).toBeUndefined();
    const record = kube.get('secrets', ns, SETUP_NAME)!;
    expect(JSON.parse(Buffer.from(record.data.seeded, 'base64').toString())).toEqual({ db: true });

    // A preview copying a main that has no such database fails saying so, before creating anything of it.
    pr++;
    const other = target(1);
    const analytics: AppSpec = { port: 4000, env: { DATABASE_URL: ref('analytics') } };
    await expect(
      c.deploy(other, [launch('api', analytics)], {
        prune: true,
        services: [{ ...mine, name: 'analytics' }],
      }),
    ).rejects.toThrow(
      /service analytics: from: main, but the main branch's environment runs no postgres service analytics/,
    );
  }, 60_000);

  test('a cluster without CloudNativePG refuses postgres, naming it, before anything is written; redis alone and no services deploy', async () => {
    const fake = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION },
      autoAdvanceMs: 20,
      without: ['postgresql.cnpg.io'],
    }).start();
    try {
      pr++;
      const c = cluster(fake);
      const t = target(1);
      await expect(
        c.deploy(t, [launch('api', API)], { prune: true, services: [db(), cache] }),
      ).rejects.toThrow(/postgres service db needs CloudNativePG.*not installed.*cnpg-1\.30\.0\.yaml/);
      expect(fake.get('namespaces', '', namespaceName(t))).toBeUndefined();
      const spec: AppSpec = { port: 4000, env: { CACHE_URL: ref('cache') } };
      await c.deploy(t, [launch('api', spec)], { prune: true, services: [cache] });
      expect(fake.get('deployments', namespaceName(t), 'cache')).toBeDefined();
      pr++;
      await c.deploy(target(1), [launch('api', { port: 4000 })], { prune: true });
      expect(fake.get('secrets', namespaceName(target(1)), SETUP_NAME)).toBeUndefined();
    } finally {
      await fake.stop();
    }
  }, 30_000);

  test('a reference to an undeclared service fails naming the app and the service, never a URL', async () => {
    pr++;
    const t = target(1);
    await expect(
      cluster().deploy(t, [launch('api', API)], { prune: true, services: [db()] }),
    ).rejects.toThrow('app api: env CACHE_URL references service cache, which preview.yaml does not declare');
    expect(kube.get('namespaces', '', namespaceName(t))).toBeUndefined();
  });

  test('serviceStates: creating while the Cluster sets up, ready after; failedServices names a stuck one', async () => {
    pr++;
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    kube.holdCluster(ns, 'db', 'Setting up primary');
    await c.deploy(t, [launch('api', API)], { prune: true, services: [db(), cache] });
    expect((await c.serviceStates(t)).db).toBe('creating');
    expect(await c.failedServices(t)).toEqual([]);
    kube.holdCluster(ns, 'db');
    expect(await ready(c, t, { api: API })).toMatchObject({ ok: true });
    expect(await c.serviceStates(t)).toEqual({ db: 'ready', cache: 'ready' });

    // A Cluster that goes to a phase waiting won't pass: failed; the other one as it is.
    pr++;
    const t2 = target(1);
    kube.holdCluster(namespaceName(t2), 'db', 'Cluster is unrecoverable and needs manual intervention');
    await c.deploy(t2, [launch('api', API)], { prune: true, services: [db(), cache] });
    expect(await ready(c, t2, { api: API })).toMatchObject({ ok: false });
    expect(await c.failedServices(t2)).toEqual(['db']);
    expect((await c.serviceStates(t2)).db).toBe('failed');
    // No services deployed: nothing to tell.
    expect(await c.serviceStates(target(1, 9999))).toEqual({});
  }, 30_000);
});
