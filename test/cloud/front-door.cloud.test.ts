import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { hostOf, namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, type Status, settled } from '../support/apps.js';
import { type Cloud, INGRESS_DOMAIN } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * The front door on EKS in the cloud simulation tier: the real handlers and steps in
 * PREVIEW_MODE=aws, a preview deployed through the real pipeline (fake CodeBuild, the deploy state machine,
 * the rollout watcher), the objects applied to the fake Kubernetes API by the real @kubernetes/client-node.
 * A protected application that sleeps gets, per app, KEDA's HTTPScaledObject (its scaledown period from the
 * setting, 0..1 replicas), an Ingress routed to the interceptor with ingress-nginx's external auth asking
 * the verifier (cached), and an `<app>.access` Ingress for the link's path; its status carries `accessUrls`.
 * Public and never sleeping, the next deploy takes all of that away.
 */

const PREVIEW_YAML = `apps:
  web:
    port: 3000
    health: /healthz
`;
/** The verifier's function URL, as the stack passes it (ACCESS_VERIFIER_URL). */
const VERIFIER = 'https://verify123.lambda-url.eu-west-1.on.aws/';
const AUTH = 'nginx.ingress.kubernetes.io/';
const PR = 5;

let cloud: Cloud;
let kube: FakeKubernetes;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
let sha: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, github, org, applicationId, sha } = await startGitHubApp(
    'front-door',
    { 'preview.yaml': PREVIEW_YAML, Dockerfile: 'FROM scratch\n' },
    { kubernetes: true, env: { ACCESS_VERIFIER_URL: VERIFIER } },
  ));
  kube = cloud.kube!;
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const path = `/v1/preview/environments/acme/shop/${PR}`;
const ns = () => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: PR });
const ready = () => pollUntil(cloud, org, path, settled, 60_000) as Promise<Status & Record<string, any>>;
const authKeys = (o: Record<string, any>) =>
  Object.keys((o.metadata?.annotations as Record<string, string> | undefined) ?? {}).filter((k) =>
    k.startsWith(`${AUTH}auth-`),
  );

/** The application's access settings, through the API as a user sets them (PATCH answers the application). */
async function settings(s: { access: 'protected' | 'public'; sleepAfterMinutes: number }) {
  const res = await call(cloud, 'PATCH', `/v1/preview/applications/${applicationId}`, {
    body: s,
    headers: bearer(org),
  });
  expect([res.status, res.body]).toEqual([200, expect.objectContaining({ applicationId, ...s })]);
  const apps = await call(cloud, 'GET', '/v1/preview/applications', { headers: bearer(org) });
  expect(apps.body.applications).toEqual([expect.objectContaining({ applicationId, ...s })]);
}

describe('the front door of a preview on EKS', () => {
  test('protected and asleep after 1.5 minutes: HTTPScaledObject, Ingress to the interceptor with external auth, the access Ingress', async () => {
    await settings({ access: 'protected', sleepAfterMinutes: 1.5 });
    const res = await call(cloud, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: PR, headSha: sha, headRef: 'feature' },
      headers: bearer(org),
    });
    expect(res.status).toBe(202);
    const deadline = Date.now() + 20_000;
    while (cloud.aws.builds.length < 1) {
      if (Date.now() > deadline) throw new Error('no image build');
      await new Promise((r) => setTimeout(r, 20));
    }
    await cloud.invoke(
      'functions/events/image-build-finished.ts',
      cloud.aws.finishBuild(cloud.aws.builds[0]!.id, 'SUCCEEDED'),
    );
    const status = await ready();
    expect(status.status).toBe('ready');
    const host = hostOf(ns(), 'web', INGRESS_DOMAIN);
    expect(status.urls).toEqual({ web: `https://${host}` });

    // KEDA's HTTP add-on: one scaler for the app, idle time from the setting, 0..1 replicas.
    const hso = kube.get('httpscaledobjects', ns(), 'web')!;
    expect(hso.apiVersion).toBe('http.keda.sh/v1alpha1');
    expect(hso.kind).toBe('HTTPScaledObject');
    expect(hso.spec).toEqual({
      hosts: [host],
      scaleTargetRef: { name: 'web', kind: 'Deployment', apiVersion: 'apps/v1', service: 'web', port: 80 },
      replicas: { min: 0, max: 1 },
      scaledownPeriod: 90,
    });
    expect(kube.get('services', ns(), 'preview-interceptor')?.spec).toMatchObject({
      type: 'ExternalName',
      externalName: 'keda-add-ons-http-interceptor-proxy.keda.svc.cluster.local',
    });

    // The app's Ingress: to the interceptor, behind ingress-nginx's external auth asking the verifier.
    const ingress = kube.get('ingresses', ns(), 'web')!;
    expect(ingress.spec.rules).toEqual([
      {
        host,
        http: {
          paths: [
            expect.objectContaining({
              path: '/',
              backend: { service: { name: 'preview-interceptor', port: { number: 8080 } } },
            }),
          ],
        },
      },
    ]);
    const a = ingress.metadata.annotations as Record<string, string>;
    const authUrl = new URL(a[`${AUTH}auth-url`]!);
    expect(`${authUrl.origin}${authUrl.pathname}`).toBe(VERIFIER);
    expect(Object.fromEntries(authUrl.searchParams)).toEqual({
      org: org.orgId,
      env: `acme/shop#${PR}`,
      app: applicationId,
    });
    expect(a[`${AUTH}auth-cache-key`]).toBe('$host$cookie_preview_access$arg_token');
    expect(a[`${AUTH}auth-cache-duration`]).toBe('200 202 60s');
    expect(a[`${AUTH}auth-always-set-cookie`]).toBe('true');

    // The link's path: an Ingress of its own to the verifier, with the same auth.
    const link = kube.get('ingresses', ns(), 'web.access')!;
    expect(link.spec.rules).toEqual([
      {
        host,
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
    for (const k of ['auth-url', 'auth-cache-key', 'auth-cache-duration'])
      expect(link.metadata.annotations[`${AUTH}${k}`]).toBe(a[`${AUTH}${k}`]);
    expect(kube.get('services', ns(), 'preview-access-verifier')?.spec).toMatchObject({
      type: 'ExternalName',
      externalName: 'verify123.lambda-url.eu-west-1.on.aws',
    });

    // The status carries the signed link per app; no log line holds it.
    expect(status.accessUrls).toEqual({
      web: expect.stringMatching(new RegExp(`^https://${host}/__preview/access\\?token=v1\\.\\d+\\.`)),
    });
    const token = new URL(status.accessUrls.web).searchParams.get('token')!;
    expect(logs.join('\n')).not.toContain(token);
  }, 90_000);

  test('public and never asleep, redeployed: no scaler, no auth annotations, no access Ingress, no accessUrls', async () => {
    await settings({ access: 'public', sleepAfterMinutes: 0 });
    const res = await call(cloud, 'PATCH', path, { headers: bearer(org) });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));
    const status = await ready();
    expect(status.status).toBe('ready');
    expect(cloud.aws.builds).toHaveLength(1);

    expect(kube.get('httpscaledobjects', ns(), 'web')).toBeUndefined();
    expect(kube.list('httpscaledobjects', ns())).toEqual([]);
    const ingress = kube.get('ingresses', ns(), 'web')!;
    expect(ingress.spec.rules[0].http.paths[0].backend.service).toEqual({
      name: 'web',
      port: expect.anything(),
    });
    expect(authKeys(ingress)).toEqual([]);
    expect(kube.get('ingresses', ns(), 'web.access')).toBeUndefined();
    expect(kube.list('ingresses', ns()).map((i) => i.metadata.name)).toEqual(['web']);
    expect(status.accessUrls).toBeUndefined();
  }, 90_000);
});
