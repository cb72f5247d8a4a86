import type { OrgCredentials } from '../../functions/core/tenancy.js';
import { appKeyPair, FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes.js';
import { type Cloud, GITHUB_APP_SECRET_ARN, startCloud } from './harness.js';

/** A cloud with the cluster, whose GitHub App is installed on acme/shop, and an org with that application. */
export interface GitHubCloud {
  cloud: Cloud;
  kube: FakeKubernetes;
  github: FakeGitHub;
  org: OrgCredentials;
  applicationId: string;
  /** The one commit of acme/shop's main: `files`. */
  sha: string;
}

/**
 * Start the cloud simulation (with the fake cluster) and a fake GitHub where App 1, its key in the App
 * secret, is installed on acme/shop, whose main holds `files`; create the org `orgName` and its
 * application of acme/shop. Stop it with `stopGitHubCloud`.
 */
export async function startGitHubCloud(orgName: string, files: Record<string, string>): Promise<GitHubCloud> {
  const github = await new FakeGitHub().start();
  const keys = appKeyPair();
  github.addApp('1', keys.publicKey);
  github.addRepo('acme/shop');
  github.addInstallation(1, '1', ['acme/shop']);
  const sha = github.addCommit('acme/shop', files, 'main');
  const cloud = await startCloud({ GITHUB_API_URL: github.url }, { kubernetes: true });
  cloud.aws.secrets.set(
    GITHUB_APP_SECRET_ARN,
    JSON.stringify({ appId: '1', privateKey: keys.privateKey, webhookSecret: 'x' }),
  );
  const tenancy = await import('../../functions/core/tenancy.js');
  const org = await tenancy.createOrganization(orgName);
  const { applicationId } = await tenancy.createApplication({ orgId: org.orgId, repoFullName: 'acme/shop' });
  return { cloud, kube: cloud.kube!, github, org, applicationId, sha };
}

export async function stopGitHubCloud(env: Partial<GitHubCloud>): Promise<void> {
  await env.cloud?.stop();
  await env.github?.stop();
}
