import { githubAppGetter } from '../../../functions/ports/source-host/github-app-secret.js';
import { appKeyPair, FakeGitHub } from './github.js';

/** An installation's Octokit, as the service's GitHub App getter makes it. */
export type InstallationOctokit = Awaited<
  ReturnType<Awaited<ReturnType<ReturnType<typeof githubAppGetter>>>['getInstallationOctokit']>
>;

/**
 * A started GitHub fake with App `appId` installed (installation `installationId`) on `acme/shop` and
 * `acme/other`, and that installation's Octokit from the service's own App getter: what the tests of the
 * fake's routes call them through, as the service does. Stop the fake after the tests.
 */
export async function installedFake(
  appId: string,
  installationId: number,
): Promise<{ github: FakeGitHub; octokit: InstallationOctokit }> {
  const github = await new FakeGitHub().start();
  const keys = appKeyPair();
  github.addApp(appId, keys.publicKey);
  github.addRepo('acme/shop');
  github.addRepo('acme/other');
  github.addInstallation(installationId, appId, ['acme/shop', 'acme/other']);
  const app = await githubAppGetter(
    { get: async () => ({ appId, privateKey: keys.privateKey, webhookSecret: 'w' }) },
    github.url,
  )();
  return { github, octokit: await app.getInstallationOctokit(installationId) };
}
