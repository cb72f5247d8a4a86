import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { hostOf, namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { verifyPath } from '../../functions/shared/access-token.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { type Cloud, INGRESS_DOMAIN } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';
import { openPreview, previewPath, settle } from './previews.js';

/*
 * The front door on EKS in the cloud simulation tier: the real handlers and steps in
 * PREVIEW_MODE=aws, a preview deployed through the real pipeline (fake CodeBuild, the deploy state machine,
 * the rollout watcher), the objects applied to the fake Kubernetes API by the real @kubernetes/client-node.
 * A protected application that sleeps gets, per app, KEDA's InterceptorRoute and ScaledObject (its cooldown
 * from the setting, 0..1 replicas), an HTTPRoute on the Gateway routed to the interceptor (a ReferenceGrant
 * in KEDA's namespace), with a rule of its own for the link's path, and Envoy Gateway's SecurityPolicy
 * asking the verifier; its status carries `accessUrls`. Public and never sleeping, the next deploy takes
 * all of that away, nothing left behind.
 */

const PREVIEW_YAML = `apps:
  web:
    port: 3000
    health: /healthz
`;
/** The verifier's function URL, as the stack passes it (ACCESS_VERIFIER_URL). */
const VERIFIER = 'https://verify123.lambda-url.eu-west-1.on.aws/';
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

const path = previewPath(PR);
const ns = () => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: PR });
const ready = () => settle({ cloud, org }, PR);
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
  test('protected and asleep after 1.5 minutes: HTTPRoute to the interceptor, InterceptorRoute, ScaledObject, SecurityPolicy', async () => {
    await settings({ access: 'protected', sleepAfterMinutes: 1.5 });
    await openPreview({ cloud, org }, PR, sha, { headRef: 'feature' });
    const status = await ready();
    expect(status.status).toBe('ready');
    const host = hostOf(ns(), 'web', INGRESS_DOMAIN);
    expect(status.urls).toEqual({ web: `https://${host}` });

    // KEDA's current API: an InterceptorRoute and a ScaledObject (idle time from the setting, 0..1).
    const ir = kube.get('interceptorroutes', ns(), 'web')!;
    expect([ir.apiVersion, ir.kind]).toEqual(['http.keda.sh/v1beta1', 'InterceptorRoute']);
    expect(ir.spec).toMatchObject({ target: { service: 'web', port: 80 }, rules: [{ hosts: [host] }] });
    const so = kube.get('scaledobjects', ns(), 'web')!;
    expect([so.apiVersion, so.kind]).toEqual(['keda.sh/v1alpha1', 'ScaledObject']);
    expect(so.spec).toMatchObject({
      scaleTargetRef: { name: 'web' },
      minReplicaCount: 0,
      maxReplicaCount: 1,
      cooldownPeriod: 90,
      triggers: [{ type: 'external-push', metadata: { interceptorRoute: 'web' } }],
    });
    expect(kube.list('httpscaledobjects', ns())).toEqual([]);

    // The app's HTTPRoute on the operator's Gateway, to the interceptor (granted in KEDA's namespace).
    const route = kube.get('httproutes', ns(), 'web')!;
    expect(route.spec.parentRefs).toEqual([
      expect.objectContaining({ kind: 'Gateway', name: 'previews', namespace: 'envoy-gateway-system' }),
    ]);
    expect(route.spec.hostnames).toEqual([host]);
    expect(route.spec.rules.map((r: any) => [r.matches[0].path, r.backendRefs[0].name])).toEqual([
      [{ type: 'Exact', value: '/__preview/access' }, 'keda-add-ons-http-interceptor-proxy'],
      [{ type: 'PathPrefix', value: '/' }, 'keda-add-ons-http-interceptor-proxy'],
    ]);
    expect(kube.get('referencegrants', 'keda', `from-${ns()}`)).toBeDefined();

    // Protection: Envoy Gateway's SecurityPolicy asks the verifier, whose path names the environment.
    const policy = kube.get('securitypolicies', ns(), 'web')!;
    expect(policy.spec.targetRefs).toEqual([
      { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
    ]);
    expect(policy.spec.extAuth.http.path).toBe(
      verifyPath({ orgId: org.orgId, envKey: `acme/shop#${PR}`, applicationId }),
    );
    expect(policy.spec.extAuth.headersToExtAuth).toContain('cookie');
    expect(kube.get('backends', ns(), 'preview-access-verifier')?.spec.endpoints).toEqual([
      { fqdn: { hostname: 'verify123.lambda-url.eu-west-1.on.aws', port: 443 } },
    ]);
    // No Ingress and no annotation of a retired controller anywhere in the namespace.
    expect(kube.list('ingresses', ns())).toEqual([]);
    for (const kind of ['httproutes', 'securitypolicies', 'services'])
      expect(JSON.stringify(kube.list(kind, ns()))).not.toContain('nginx.ingress.kubernetes.io');

    // The status carries the signed link per app; no log line holds it.
    expect(status.accessUrls).toEqual({
      web: expect.stringMatching(new RegExp(`^https://${host}/__preview/access\\?token=v1\\.\\d+\\.`)),
    });
    const token = new URL(status.accessUrls.web).searchParams.get('token')!;
    expect(logs.join('\n')).not.toContain(token);
  }, 90_000);

  test('public and never asleep, redeployed: no scaler, no policy, nothing left behind, no accessUrls', async () => {
    await settings({ access: 'public', sleepAfterMinutes: 0 });
    const res = await call(cloud, 'PATCH', path, { headers: bearer(org) });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));
    const status = await ready();
    expect(status.status).toBe('ready');
    expect(cloud.aws.builds).toHaveLength(1);

    for (const kind of ['scaledobjects', 'interceptorroutes', 'securitypolicies', 'backends', 'ingresses'])
      expect([kind, kube.list(kind, ns())]).toEqual([kind, []]);
    expect(kube.get('referencegrants', 'keda', `from-${ns()}`)).toBeUndefined();
    const route = kube.get('httproutes', ns(), 'web')!;
    expect(route.spec.rules).toEqual([
      expect.objectContaining({ backendRefs: [expect.objectContaining({ kind: 'Service', name: 'web' })] }),
    ]);
    expect(kube.list('services', ns()).map((i) => i.metadata.name)).toEqual(['web']);
    expect(status.accessUrls).toBeUndefined();
  }, 90_000);
});
