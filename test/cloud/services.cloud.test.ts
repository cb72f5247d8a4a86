import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { pollUntil } from '../support/apps.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';
import { deployPreview, openPreview, previewPath, settle } from './previews.js';

/*
 * preview.yaml services on EKS in the cloud simulation tier: the real handlers and steps in
 * PREVIEW_MODE=aws, previews deployed through the real pipeline (GitHub, CodeBuild, the deploy state
 * machine, the rollout watcher), their objects written to the fake Kubernetes API by the real
 * @kubernetes/client-node: a CloudNativePG Cluster (checked against its CRD's required fields) and its
 * credentials, Redis's Deployment and Service, the migrate and seed Jobs before the app starts, the URLs
 * in the app's env with the password from a secretKeyRef, a failing migrate failing the deploy (masked),
 * `from: main` as an import bootstrap, and teardown deleting it all.
 */

const ref = (name: string) => `\${services.${name}.url}`;
const yaml = (migrate: string, from = '', version = '16') => `services:
  db:
    kind: postgres
    version: "${version}"
    seed: node seed.js${from}
  cache:
    kind: redis
    version: "7"
apps:
  api:
    port: 4000
    migrate: ${migrate}
    env:
      DATABASE_URL: ${ref('db')}
      CACHE_URL: ${ref('cache')}
`;

let cloud: Cloud;
let kube: FakeKubernetes;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, github, org, applicationId } = await startGitHubApp(
    'services',
    { 'preview.yaml': yaml('node migrate.js'), Dockerfile: 'FROM scratch\n' },
    { kubernetes: true },
  ));
  kube = cloud.kube!;
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const path = previewPath;
const ns = (pr: number) => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: pr });
const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

/** Open (or deploy the main branch: pr 0) at `sha`, finish its build; the rollout goes on. */
const start = (pr: number, sha: string) => openPreview({ cloud, org }, pr, sha, { applicationId });
/**
 * `start`, then wait until it settles (a failed one until MarkFailed has also stopped its services: it
 * records `failed` first).
 */
const deploy = (pr: number, sha: string) =>
  deployPreview({ cloud, org }, pr, sha, {
    applicationId,
    done: (s) =>
      s.status === 'ready' ||
      (s.status === 'failed' &&
        Object.values(s.services ?? {}).every((v: any) => v.status === 'stopped' || v.status === 'failed')),
  });

describe('services of a preview on EKS', () => {
  test('a Cluster and Redis, the URLs by secretKeyRef, migrate then seed before the app; nothing leaks', async () => {
    const sha = github.addCommit('acme/shop', { 'preview.yaml': yaml('node migrate.js') }, 'feature-1');
    const status = await deploy(1, sha);
    expect(status.status).toBe('ready');
    expect(status.services).toEqual({
      db: { kind: 'postgres', status: 'ready' },
      cache: { kind: 'redis', status: 'ready' },
    });
    const n = ns(1);
    const pg = kube.get('clusters', n, 'db')!;
    expect([pg.apiVersion, pg.kind]).toEqual(['postgresql.cnpg.io/v1', 'Cluster']);
    expect(pg.spec).toMatchObject({
      instances: 1,
      imageName: 'ghcr.io/cloudnative-pg/postgresql:16',
      storage: { size: '1Gi' },
      bootstrap: { initdb: { database: 'app', owner: 'preview', secret: { name: 'db-credentials' } } },
    });
    expect(pg.status.phase).toBe('Cluster in healthy state');
    const dbPassword = b64(kube.get('secrets', n, 'db-credentials')!.data.password);
    const cachePassword = b64(kube.get('secrets', n, 'cache-credentials')!.data.password);
    expect(dbPassword.length).toBeGreaterThanOrEqual(32);
    expect(kube.get('deployments', n, 'cache')!.spec.template.spec.containers[0].image).toBe('redis:7');
    expect(kube.get('services', n, 'cache')).toBeDefined();

    // The Jobs ran in order, before the app's pod.
    expect(kube.history.filter((h) => h.includes(`${n}/`) && !h.includes('/cache'))).toEqual([
      `job started ${n}/api-migrate-g1`,
      `job succeeded ${n}/api-migrate-g1`,
      `job started ${n}/db-seed-g1`,
      `job succeeded ${n}/db-seed-g1`,
      `pod ${n}/api`,
    ]);
    const api = kube.get('deployments', n, 'api')!;
    expect(api.spec.replicas).toBe(1);
    const env = api.spec.template.spec.containers[0].env;
    expect(env).toEqual(
      expect.arrayContaining([
        {
          name: 'PREVIEW_SERVICE_DB_PASSWORD',
          valueFrom: { secretKeyRef: { name: 'db-credentials', key: 'password' } },
        },
        {
          name: 'DATABASE_URL',
          value: `postgres://preview:$(PREVIEW_SERVICE_DB_PASSWORD)@db-rw.${n}.svc.cluster.local:5432/app`,
        },
      ]),
    );
    // No password in a response, a log line, a Deployment or a Job.
    const everything = JSON.stringify([
      status,
      logs,
      kube.list('deployments', n),
      kube.list('jobs', n),
      kube.list('clusters', n),
    ]);
    for (const secret of [dbPassword, cachePassword]) expect(everything).not.toContain(secret);
  }, 90_000);

  test('a failing migrate fails the deploy with its command, exit code and output, masked', async () => {
    const sha = github.addCommit('acme/shop', { 'preview.yaml': yaml('node migrate.js --v2') }, 'feature-2');
    kube.jobOutcome('node migrate.js --v2', 3, ['migrating', 'error: relation "users" already exists']);
    const status = await deploy(2, sha);
    expect(status.status).toBe('failed');
    expect(status.error).toContain('app api: migrate `node migrate.js --v2` failed (exit code 3)');
    expect(status.error).toContain('relation "users" already exists');
    expect(kube.history).not.toContain(`pod ${ns(2)}/api`);
    const password = b64(kube.get('secrets', ns(2), 'db-credentials')!.data.password);
    expect(JSON.stringify([status, logs])).not.toContain(password);
  }, 90_000);

  test('from: main imports the main branch’s database (no seed); teardown deletes the Cluster and Redis', async () => {
    expect((await deploy(0, '')).status).toBe('ready');
    expect(kube.get('clusters', ns(0), 'db')).toBeDefined();
    const sha = github.addCommit(
      'acme/shop',
      { 'preview.yaml': yaml('node migrate.js', '\n    from: main') },
      'feature-3',
    );
    const status = await deploy(3, sha);
    expect(status.status).toBe('ready');
    const pg = kube.get('clusters', ns(3), 'db')!;
    expect(pg.spec.bootstrap.initdb.import).toEqual({
      type: 'microservice',
      databases: ['app'],
      source: { externalCluster: 'main' },
    });
    expect(pg.spec.externalClusters[0].connectionParameters.host).toBe(`db-rw.${ns(0)}.svc.cluster.local`);
    expect(kube.history).not.toContain(`job started ${ns(3)}/db-seed-g1`);
    expect(kube.history).toContain(`job succeeded ${ns(3)}/api-migrate-g1`);

    expect((await call(cloud, 'DELETE', path(3), { headers: bearer(org) })).status).toBe(202);
    const gone = await pollUntil(cloud, org, path(3), (s) => s.status === 'torn_down', 60_000);
    expect(gone.status).toBe('torn_down');
    expect(kube.namespaces()).not.toContain(ns(3));
    for (const kind of ['clusters', 'deployments', 'services', 'secrets', 'jobs'])
      expect([kind, kube.list(kind, ns(3))]).toEqual([kind, []]);
  }, 120_000);

  test('services say `creating` while the Cluster is not healthy, `ready` once the watcher has it ready', async () => {
    const n = ns(4);
    kube.holdCluster(n, 'db', 'Setting up primary');
    await start(
      4,
      github.addCommit('acme/shop', { 'preview.yaml': yaml('node migrate.js'), 'pr.txt': '4' }, 'feature-4'),
    );
    const waiting = await pollUntil(cloud, org, path(4), (s: any) => s.services !== undefined, 30_000);
    expect(waiting.status).toBe('deploying');
    expect((waiting as any).services.db).toEqual({ kind: 'postgres', status: 'creating' });
    // Held a while longer: still not ready, and no Job nor the app started.
    await new Promise((r) => setTimeout(r, 500));
    const still = (await call(cloud, 'GET', path(4), { headers: bearer(org) })).body;
    expect([still.status, still.services.db.status]).toEqual(['deploying', 'creating']);
    expect(kube.get('clusters', n, 'db')!.status.phase).toBe('Setting up primary');
    expect(kube.history.filter((h) => h.includes(`${n}/`) && !h.includes('/cache'))).toEqual([]);

    kube.holdCluster(n, 'db');
    const status = await settle({ cloud, org }, 4);
    expect(status.status).toBe('ready');
    expect(status.services).toEqual({
      db: { kind: 'postgres', status: 'ready' },
      cache: { kind: 'redis', status: 'ready' },
    });
  }, 90_000);

  test('a Cluster that fails, or a seed that fails, says `failed`; the other service `stopped`', async () => {
    kube.holdCluster(ns(5), 'db', 'Cluster is unrecoverable and needs manual intervention');
    const stuck = await deploy(
      5,
      github.addCommit('acme/shop', { 'preview.yaml': yaml('node migrate.js'), 'pr.txt': '5' }, 'feature-5'),
    );
    expect(stuck.status).toBe('failed');
    expect(stuck.error).toContain('service db: Cluster is unrecoverable and needs manual intervention');
    expect(stuck.services).toEqual({
      db: { kind: 'postgres', status: 'failed' },
      cache: { kind: 'redis', status: 'stopped' },
    });

    kube.jobOutcome('node seed.js', 1, ['seeding', 'error: duplicate key']);
    try {
      const seeded = await deploy(
        6,
        github.addCommit(
          'acme/shop',
          { 'preview.yaml': yaml('node migrate.js'), 'pr.txt': '6' },
          'feature-6',
        ),
      );
      expect(seeded.status).toBe('failed');
      expect(seeded.error).toContain('service db: seed `node seed.js` (in app api) failed (exit code 1)');
      expect(seeded.services).toEqual({
        db: { kind: 'postgres', status: 'failed' },
        cache: { kind: 'redis', status: 'stopped' },
      });
    } finally {
      kube.jobOutcome('node seed.js', 0);
    }
  }, 90_000);

  test('a changed postgres version is refused, naming the fix; the database is left as it was', async () => {
    const n = ns(7);
    const files = (version: string) => ({
      'preview.yaml': yaml('node migrate.js', '', version),
      'pr.txt': `7-${version}`,
    });
    expect((await deploy(7, github.addCommit('acme/shop', files('16'), 'feature-7'))).status).toBe('ready');
    const before = kube.get('clusters', n, 'db')!;
    const namespace = kube.get('namespaces', '', n)!;
    const credentials = kube.get('secrets', n, 'db-credentials')!;
    const writes = kube.requests.length;

    const status = await deploy(7, github.addCommit('acme/shop', files('17'), 'feature-7'));
    expect(status.status).toBe('failed');
    expect(status.error).toContain(
      'service db: postgres 17 declared, but its database was created with postgres 16.',
    );
    expect(status.error).toContain('tear the environment down and deploy it again for a new database');
    // Refused before the deploy wrote anything: the Cluster as it was, the namespace not taken by the new
    // generation; the only write is MarkFailed's keeping the stopped app's output (a Secret).
    expect(kube.get('clusters', n, 'db')).toEqual(before);
    expect(kube.get('clusters', n, 'db')!.spec.imageName).toBe('ghcr.io/cloudnative-pg/postgresql:16');
    expect(kube.get('namespaces', '', n)!.metadata.annotations).toEqual(namespace.metadata.annotations);
    const written = kube.requests
      .slice(writes)
      .filter((r) => /^(POST|PUT|PATCH) /.test(r) && r.includes(`/namespaces/${n}`));
    expect(written).toEqual([`POST /api/v1/namespaces/${n}/secrets`]);
    expect(kube.get('secrets', n, 'db-credentials')).toEqual(credentials);
  }, 120_000);
});
