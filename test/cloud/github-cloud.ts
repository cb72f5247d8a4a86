import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { type Cloud, GITHUB_APP_SECRET_ARN, startCloud } from './cloud-tier.js';
import { appKeyPair, FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';

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

/** What `startGitHubApp` sets up beside the defaults (App 1, installation 1, no cluster). */
export interface GitHubAppOptions {
  /** Handler settings beside `GITHUB_API_URL` (`EVENT_BUS_NAME`…). */
  env?: Record<string, string>;
  /** The fake cluster too. */
  kubernetes?: boolean;
  /** API groups whose CRDs the fake cluster leaves out (engines not installed). */
  kubernetesWithout?: string[];
  appId?: string;
  installationId?: number;
  /** The webhook secret in the App secret. */
  webhookSecret?: string;
  /** Repositories of the fake GitHub the App is not installed on. */
  otherRepos?: string[];
}

/**
 * Start the cloud simulation and a fake GitHub where the App, its key in the App secret, is installed on
 * acme/shop, whose main holds `files`; create the org `orgName` and its application of acme/shop. Stop it
 * with `stopGitHubCloud`.
 */
export async function startGitHubApp(
  orgName: string,
  files: Record<string, string>,
  opts: GitHubAppOptions = {},
): Promise<Omit<GitHubCloud, 'kube'> & { cloud: Cloud }> {
  const appId = opts.appId ?? '1';
  const github = await new FakeGitHub().start();
  const keys = appKeyPair();
  github.addApp(appId, keys.publicKey);
  github.addRepo('acme/shop');
  for (const repo of opts.otherRepos ?? []) github.addRepo(repo);
  github.addInstallation(opts.installationId ?? 1, appId, ['acme/shop']);
  const sha = github.addCommit('acme/shop', files, 'main');
  const cloud = await startCloud(
    { GITHUB_API_URL: github.url, ...opts.env },
    { kubernetes: opts.kubernetes ?? false, kubernetesWithout: opts.kubernetesWithout },
  );
  cloud.aws.secrets.set(
    GITHUB_APP_SECRET_ARN,
    JSON.stringify({ appId, privateKey: keys.privateKey, webhookSecret: opts.webhookSecret ?? 'x' }),
  );
  const tenancy = await import('../../functions/core/applications/applications.js');
  const org = await tenancy.createOrganization(orgName);
  const { applicationId } = await tenancy.createApplication({ orgId: org.orgId, repoFullName: 'acme/shop' });
  return { cloud, github, org, applicationId, sha };
}

/** `startGitHubApp` with the fake cluster. */
export async function startGitHubCloud(orgName: string, files: Record<string, string>): Promise<GitHubCloud> {
  const started = await startGitHubApp(orgName, files, { kubernetes: true });
  return { ...started, kube: started.cloud.kube! };
}

export async function stopGitHubCloud(env: Partial<GitHubCloud>): Promise<void> {
  await env.cloud?.stop();
  await env.github?.stop();
}
