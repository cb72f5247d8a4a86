import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, settled } from '../support/apps.js';
import { type Cloud, GITHUB_APP_SECRET_ARN, startCloud } from './cloud-tier.js';
import { appKeyPair, FakeGitHub } from './fakes/github.js';

/*
 * A GitHub App secret holding the wrong private key (its own container, since credentials are read once
 * per container): deploys fail saying what to fix, the main-branch deploy answers 503 saying so, and the
 * key appears nowhere.
 */

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let sha: string;
let wrongKey: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  github = await new FakeGitHub().start();
  github.addApp('99', appKeyPair().publicKey);
  github.addRepo('acme/shop');
  github.addInstallation(1, '99', ['acme/shop']);
  sha = github.addCommit('acme/shop', { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n' }, 'main');
  cloud = await startCloud({ GITHUB_API_URL: github.url });
  wrongKey = appKeyPair().privateKey;
  cloud.aws.secrets.set(
    GITHUB_APP_SECRET_ARN,
    JSON.stringify({ appId: '99', privateKey: wrongKey, webhookSecret: 'x' }),
  );
  const tenancy = await import('../../functions/core/applications/applications.js');
  org = await tenancy.createOrganization('creds');
  await tenancy.createApplication({ orgId: org.orgId, repoFullName: 'acme/shop' });
}, 60_000);
afterAll(async () => {
  await cloud?.stop();
  await github?.stop();
}, 30_000);

const keyBody = () => wrongKey.split('\n').find((l) => l.length > 40)!;

describe('a wrong private key in the GitHub App secret', () => {
  test('a deploy fails with an error that says which credentials GitHub rejected, never quoting the key', async () => {
    const res = await call(cloud, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: 1, headSha: sha, headRef: 'f' },
      headers: bearer(org),
    });
    expect(res.status).toBe(202);
    const status = await pollUntil(cloud, org, '/v1/preview/environments/acme/shop/1', settled);
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(/GitHub rejected the App's credentials \(401/);
    expect(status.error).toContain(GITHUB_APP_SECRET_ARN);
    expect(JSON.stringify(status)).not.toContain(keyBody());
    expect(logs.join('\n')).not.toContain(keyBody());
  }, 30_000);

  test('the main-branch deploy answers 503 saying so', async () => {
    const tenancy = await import('../../functions/core/applications/applications.js');
    const app = (await tenancy.findApplicationByRepo(org.orgId, 'acme/shop'))!;
    const res = await call(cloud, 'POST', `/v1/preview/applications/${app.applicationId}/0`, {
      headers: bearer(org),
    });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatch(/GitHub rejected the App's credentials/);
    expect(res.text).not.toContain(keyBody());
  });
});
