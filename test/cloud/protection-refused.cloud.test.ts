import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { bearer, call } from '../support/api.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';
import { deployPreview } from './previews.js';

/*
 * A stack whose Gateway can enforce no protection (an ALB's: `protection=none`, `defaultAccess=public`
 * chosen at deploy) in the cloud simulation tier: the real handlers in PREVIEW_MODE=aws. Asking for
 * `access: protected` answers 400 naming the setting and stores nothing (what `previewctl apps update
 * --access protected` sends); the default access is the one the stack chose, so a preview deploys public,
 * its objects on the fake Kubernetes API free of any SecurityPolicy.
 */

const PR = 3;
let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
let sha: string;

beforeAll(async () => {
  ({ cloud, github, org, applicationId, sha } = await startGitHubApp(
    'no-protection',
    { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n', Dockerfile: 'FROM scratch\n' },
    { kubernetes: true, env: { EKS_PROTECTION: 'none', PREVIEW_DEFAULT_ACCESS: 'public' } },
  ));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

describe('protection where the cluster cannot enforce it', () => {
  test('PATCH application access=protected: 400 naming the setting, nothing stored', async () => {
    const before = await call(cloud, 'GET', '/v1/preview/applications', { headers: bearer(org) });
    const res = await call(cloud, 'PATCH', `/v1/preview/applications/${applicationId}`, {
      body: { access: 'protected', sleepAfterMinutes: 5 },
      headers: bearer(org),
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: expect.stringMatching(
        /^access cannot be protected: protection cannot be enforced on this cluster: the stack's protection setting is none/,
      ),
    });
    const after = await call(cloud, 'GET', '/v1/preview/applications', { headers: bearer(org) });
    expect(after.body).toEqual(before.body);
    expect(after.body.applications).toEqual([expect.objectContaining({ applicationId, access: 'public' })]);
    // Public stays allowed.
    const ok = await call(cloud, 'PATCH', `/v1/preview/applications/${applicationId}`, {
      body: { access: 'public' },
      headers: bearer(org),
    });
    expect(ok.status).toBe(200);
  });

  test('the default access the stack chose: a preview deploys public, no SecurityPolicy, no access link', async () => {
    const status = await deployPreview({ cloud, org }, PR, sha, { headRef: 'feature' });
    expect(status.status).toBe('ready');
    expect(status.accessUrls).toBeUndefined();
    const ns = namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: PR });
    expect(cloud.kube!.list('httproutes', ns).map((r) => r.metadata.name)).toEqual(['web']);
    expect(cloud.kube!.list('securitypolicies', ns)).toEqual([]);
  }, 90_000);
});
