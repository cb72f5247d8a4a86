import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, settled } from '../support/apps.js';
import { type Cloud, INGRESS_DOMAIN } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';
import { startGitHubCloud, stopGitHubCloud } from './github-cloud.js';

/*
 * The cloud path, part 2, in the cloud simulation tier: the whole two-app lifecycle in AWS mode, images
 * built on (fake) CodeBuild and run on (fake) EKS through the real @kubernetes/client-node, readiness
 * reported by the rollout watcher Lambda (invoked asynchronously through the fake Lambda API).
 */

const PREVIEW_YAML = `apps:
  web:
    port: 3000
    health: /healthz
    env: { GREETING: hello }
  api:
    port: 4000
`;

let cloud: Cloud;
let kube: FakeKubernetes;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
let sha: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, kube, github, org, applicationId, sha } = await startGitHubCloud('lifecycle', {
    'preview.yaml': PREVIEW_YAML,
    Dockerfile: 'FROM scratch\n',
  }));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const auth = () => bearer(org);
const path = (pr: number) => `/v1/preview/environments/acme/shop/${pr}`;
const ns = (pr: number) => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: pr });
const template = (pr: number, app: string) =>
  JSON.stringify(kube.get('deployments', ns(pr), app)?.spec.template);
const imageOf = (pr: number, app: string) =>
  kube.get('deployments', ns(pr), app)?.spec.template.spec.containers[0].image as string;
const secretOf = (pr: number, app: string) =>
  kube.get('secrets', ns(pr), app)?.data as Record<string, string>;

/** Wait for the next image build and play it to success (the event reaches the real event handler). */
async function buildSucceeds(count: number) {
  const deadline = Date.now() + 20_000;
  while (cloud.aws.builds.length < count) {
    if (Date.now() > deadline) throw new Error(`no build #${count}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const build = cloud.aws.builds[count - 1]!;
  await cloud.invoke(
    'functions/events/image-build-finished.ts',
    cloud.aws.finishBuild(build.id, 'SUCCEEDED'),
  );
  return build;
}
const ready = (pr: number) => pollUntil(cloud, org, path(pr), settled, 60_000);

describe('the two-app lifecycle on EKS', () => {
  test('deploy → ready with an https URL per app, in a namespace of its own, the bundle as a Secret', async () => {
    const put = await call(cloud, 'PUT', `/v1/preview/secrets/${applicationId}/web`, {
      body: { items: [{ key: 'TOKEN', value: 'first-secret-value' }] },
      headers: auth(),
    });
    expect(put.status).toBe(200);
    const res = await call(cloud, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: 1, headSha: sha, headRef: 'feature' },
      headers: auth(),
    });
    expect(res.status).toBe(202);
    await buildSucceeds(1);
    const status = await ready(1);
    expect(status).toMatchObject({ status: 'ready', lastDeployedSha: sha });
    expect(status.urls).toEqual({
      web: `https://web-${ns(1)}.${INGRESS_DOMAIN}`,
      api: `https://api-${ns(1)}.${INGRESS_DOMAIN}`,
    });
    expect(ns(1).length).toBeLessThanOrEqual(63);
    expect(kube.namespaces()).toContain(ns(1));
    for (const app of ['web', 'api']) {
      expect(imageOf(1, app)).toMatch(
        /^000000000000\.dkr\.ecr\.eu-west-1\.amazonaws\.com\/preview-apps@sha256:[0-9a-f]{64}$/,
      );
      expect(kube.get('services', ns(1), app)).toBeDefined();
      expect(kube.get('httproutes', ns(1), app)?.spec.hostnames).toEqual([
        `${app}-${ns(1)}.${INGRESS_DOMAIN}`,
      ]);
    }
    expect(Buffer.from(secretOf(1, 'web').TOKEN!, 'base64').toString()).toBe('first-secret-value');
    expect(kube.list('resourcequotas', ns(1))).toHaveLength(1);
    expect(kube.list('networkpolicies', ns(1)).length).toBeGreaterThanOrEqual(1);
    expect(logs.join('\n')).not.toContain('first-secret-value');
  }, 90_000);

  test('a secret change plus restart changes only that app: its Secret and pod template', async () => {
    const webBefore = template(1, 'web');
    const apiBefore = template(1, 'api');
    const builds = cloud.aws.builds.length;
    await call(cloud, 'PUT', `/v1/preview/secrets/${applicationId}/web/TOKEN`, {
      body: { value: 'second-secret-value' },
      headers: auth(),
    });
    const res = await call(cloud, 'PATCH', `${path(1)}/apps/web`, {
      body: { mode: 'restart' },
      headers: auth(),
    });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 200));
    expect((await ready(1)).status).toBe('ready');
    expect(Buffer.from(secretOf(1, 'web').TOKEN!, 'base64').toString()).toBe('second-secret-value');
    expect(template(1, 'web')).not.toBe(webBefore);
    expect(kube.get('deployments', ns(1), 'web')?.spec.template.metadata.annotations).toHaveProperty([
      'kubectl.kubernetes.io/restartedAt',
    ]);
    expect(template(1, 'api')).toBe(apiBefore);
    expect(cloud.aws.builds).toHaveLength(builds); // a restart builds nothing
  }, 60_000);

  test('a rebuild changes only that app’s image', async () => {
    const webBefore = template(1, 'web');
    const apiImage = imageOf(1, 'api');
    const res = await call(cloud, 'PATCH', `${path(1)}/apps/api`, {
      body: { mode: 'rebuild' },
      headers: auth(),
    });
    expect(res.status).toBe(202);
    const build = await buildSucceeds(cloud.aws.builds.length + 1);
    expect((JSON.parse(build.env.BUILDS!) as { app: string }[]).map((b) => b.app)).toEqual(['api']);
    expect((await ready(1)).status).toBe('ready');
    expect(imageOf(1, 'api')).not.toBe(apiImage);
    expect(template(1, 'web')).toBe(webBefore);
  }, 60_000);

  test('a whole redeploy reuses the images and ends ready', async () => {
    const builds = cloud.aws.builds.length;
    const res = await call(cloud, 'PATCH', path(1), { headers: auth() });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 200));
    expect((await ready(1)).status).toBe('ready');
    expect(cloud.aws.builds).toHaveLength(builds);
  }, 60_000);

  test('teardown deletes the namespace; then both redeploys answer 409', async () => {
    expect((await call(cloud, 'DELETE', path(1), { headers: auth() })).status).toBe(202);
    const gone = await pollUntil(cloud, org, path(1), (s) => s.status === 'torn_down', 60_000);
    expect(gone).toMatchObject({ status: 'torn_down', urls: {} });
    expect(kube.namespaces()).not.toContain(ns(1));
    expect((await call(cloud, 'PATCH', path(1), { headers: auth() })).status).toBe(409);
    expect((await call(cloud, 'PATCH', `${path(1)}/apps/web`, { headers: auth() })).status).toBe(409);
  }, 60_000);
});

describe('failures on the cluster', () => {
  test('a crash-looping app fails the environment with the pod’s reason and its last log lines, masked', async () => {
    await call(cloud, 'PUT', `/v1/preview/secrets/${applicationId}/web/TOKEN`, {
      body: { value: 'crash-secret-value' },
      headers: auth(),
    });
    kube.inject(ns(2), 'web', 'CrashLoopBackOff', 'back-off restarting failed container');
    kube.setLogs(ns(2), 'web', ['booting', 'connecting with crash-secret-value', 'Error: cannot connect']);
    const res = await call(cloud, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: 2, headSha: sha, headRef: 'feature' },
      headers: auth(),
    });
    expect(res.status).toBe(202);
    const status = await pollUntil(cloud, org, path(2), settled, 60_000);
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(/web/);
    expect(status.error).toMatch(/CrashLoopBackOff/);
    expect(status.error).toMatch(/Error: cannot connect/);
    expect(status.error).not.toContain('crash-secret-value');
    expect(status.error).toContain('previewctl envs logs web --repo acme/shop --pr 2');

    // The environment failed: its Deployments are deleted, and their pods with them (the fake removes a
    // deleted Deployment's pods on its next tick) ...
    const deadline = Date.now() + 10_000;
    while (
      kube.get('deployments', ns(2), 'web') ||
      kube.list('pods', ns(2)).some((p) => p.metadata.labels?.app === 'web')
    ) {
      if (Date.now() > deadline) throw new Error('the Deployment and pods of web were not removed');
      await new Promise((r) => setTimeout(r, 50));
    }
    // ... but the log the error points to still answers: the crashed app's last output, masked.
    const log = await call(cloud, 'GET', `${path(2)}/apps/web/logs`, { headers: auth() });
    expect(log.status).toBe(200);
    expect(log.text).toMatch(
      /^--- the app's output kept when the environment failed \([^)]+\); no pod of it runs now ---\n--- pod web-[\w-]+ \(.*\) ---\nbooting\nconnecting with \[secret\]\nError: cannot connect\n$/,
    );
    expect(log.text).not.toContain('crash-secret-value');
    const tail = await call(cloud, 'GET', `${path(2)}/apps/web/logs?tail=1`, { headers: auth() });
    expect(tail.text).toBe('Error: cannot connect\n');
    // Another organization reads nothing of it.
    const { createOrganization } = await import('../../functions/core/applications/applications.js');
    const foreign = await call(cloud, 'GET', `${path(2)}/apps/web/logs`, {
      headers: bearer(await createOrganization('stranger')),
    });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'environment not found' });
  }, 60_000);
});
