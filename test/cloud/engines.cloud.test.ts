import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, type Status, settled } from '../support/apps.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * Optional engines in the cloud simulation tier: the real handlers in PREVIEW_MODE=aws against a fake
 * cluster that has none of KEDA (and its HTTP add-on), Envoy Gateway or CloudNativePG installed (their
 * CRDs absent: their kinds answer 404), only the Gateway API. A public preview that never sleeps uses
 * none of them: its whole deploy (which prunes every kind it may have written) succeeds. One that sleeps
 * needs KEDA: its deploy fails naming KEDA and how to install it, and writes nothing on the cluster.
 */

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
let sha: string;

beforeAll(async () => {
  ({ cloud, github, org, applicationId, sha } = await startGitHubApp(
    'engines',
    { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n', Dockerfile: 'FROM scratch\n' },
    {
      kubernetes: true,
      kubernetesWithout: ['keda.sh', 'gateway.envoyproxy.io', 'postgresql.cnpg.io'],
      env: { EKS_PROTECTION: 'none', PREVIEW_DEFAULT_ACCESS: 'public' },
    },
  ));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const path = (pr: number) => `/v1/preview/environments/acme/shop/${pr}`;
const ns = (pr: number) => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: pr });
/** Deploy PR `pr` at the one commit; finish its image build when one starts; the settled status. */
async function deploy(pr: number): Promise<Status & Record<string, unknown>> {
  const builds = cloud.aws.builds.length;
  const res = await call(cloud, 'POST', '/v1/preview/environments', {
    body: { repoFullName: 'acme/shop', prNumber: pr, headSha: sha, headRef: 'feature' },
    headers: bearer(org),
  });
  expect(res.status).toBe(202);
  if (builds === 0) {
    const deadline = Date.now() + 20_000;
    while (cloud.aws.builds.length === builds) {
      if (Date.now() > deadline) throw new Error('no image build');
      await new Promise((r) => setTimeout(r, 20));
    }
    await cloud.invoke(
      'functions/events/image-build-finished.ts',
      cloud.aws.finishBuild(cloud.aws.builds[builds]!.id, 'SUCCEEDED'),
    );
  }
  return (await pollUntil(cloud, org, path(pr), settled, 60_000)) as Status & Record<string, unknown>;
}

/** The application's sleep setting, as a user sets it. */
async function sleepAfter(minutes: number) {
  const res = await call(cloud, 'PATCH', `/v1/preview/applications/${applicationId}`, {
    body: { sleepAfterMinutes: minutes },
    headers: bearer(org),
  });
  expect([res.status, res.body.sleepAfterMinutes]).toEqual([200, minutes]);
}

describe('a cluster without KEDA, Envoy Gateway or CloudNativePG', () => {
  test('a public preview that never sleeps deploys, and deploys again as a whole (the prune lists every kind)', async () => {
    await sleepAfter(0);
    const first = await deploy(1);
    expect([first.status, first.error]).toEqual(['ready', undefined]);
    expect(cloud.kube!.list('httproutes', ns(1)).map((r) => r.metadata.name)).toEqual(['web']);
    const again = await call(cloud, 'PATCH', path(1), { headers: bearer(org) });
    expect(again.status).toBe(202);
    expect(await pollUntil(cloud, org, path(1), settled, 60_000)).toMatchObject({ status: 'ready' });
    // The kinds of the missing engines were listed (404: none can exist) and nothing failed on them.
    const listed = cloud.kube!.requests.filter((r) => /^GET \/apis\/(http\.)?keda\.sh\//.test(r));
    expect(listed.length).toBeGreaterThan(0);
  }, 90_000);

  test('a preview that sleeps fails naming KEDA and how to install it; nothing of it is on the cluster', async () => {
    await sleepAfter(5);
    const status = await deploy(2);
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(/needs KEDA with its HTTP add-on.*not installed.*helm install keda/);
    expect(cloud.kube!.list('deployments', ns(2))).toEqual([]);
    expect(cloud.kube!.list('httproutes', ns(2))).toEqual([]);
  }, 90_000);
});
