import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';
import { deployPreview } from './previews.js';

/*
 * A cluster without CloudNativePG, in the cloud simulation tier (PREVIEW_MODE=aws, the real pipeline, the
 * fake Kubernetes API without the postgresql.cnpg.io CRDs): a preview that declares a postgres service
 * fails before anything of it is written, naming CloudNativePG and how to install it; one without
 * services, and one with only redis, deploy.
 */

const APPS = `apps:
  api:
    port: 4000
`;
const WITH = (kind: string) => `services:
  db:
    kind: ${kind}
    version: "${kind === 'postgres' ? '16' : '7'}"
${APPS}    env:
      DATABASE_URL: \${services.db.url}
`;

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;

beforeAll(async () => {
  ({ cloud, github, org } = await startGitHubApp(
    'no-cnpg',
    { 'preview.yaml': APPS, Dockerfile: 'FROM scratch\n' },
    { kubernetes: true, kubernetesWithout: ['postgresql.cnpg.io'] },
  ));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

/** Open PR `pr` with a commit of `files` and wait until its deploy settles. */
const open = (pr: number, files: Record<string, string>) =>
  deployPreview({ cloud, org }, pr, github.addCommit('acme/shop', files, `feature-${pr}`));

describe('a cluster without CloudNativePG', () => {
  test('a postgres service is refused naming CloudNativePG; nothing of the preview is written', async () => {
    const status = await open(1, { 'preview.yaml': WITH('postgres') });
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(
      /postgres service db needs CloudNativePG.*not installed on the cluster.*Install it: kubectl apply --server-side -f https:\/\/raw\.githubusercontent\.com\/cloudnative-pg\/cloudnative-pg\/release-1\.30\/releases\/cnpg-1\.30\.0\.yaml/,
    );
    const ns = namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: 1 });
    expect(cloud.kube!.namespaces()).not.toContain(ns);
  }, 90_000);

  test('a preview without services deploys, and so does one with only redis', async () => {
    expect((await open(2, { 'preview.yaml': APPS })).status).toBe('ready');
    const redis = await open(3, { 'preview.yaml': WITH('redis') });
    expect(redis.status).toBe('ready');
    expect(redis.services).toEqual({ db: { kind: 'redis', status: 'ready' } });
  }, 90_000);
});
