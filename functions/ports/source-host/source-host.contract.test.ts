import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { appKeyPair, FakeGitHub } from '../../../test/cloud/fakes/github.js';
import { makeRepo, setBranch } from '../../../test/support/git.js';
import { GitHubAppSourceHost } from './github-app.js';
import { GitHubAppCredentials } from './github-app-secret.js';
import { GitSourceHost } from './local-git.js';
import type { SourceHost } from './port.js';

/*
 * The SourceHost contract, run against every adapter. Each adapter's fixture holds the repository
 * `acme/shop` with `preview.yaml` and `src/app.js` on `main` at `sha`, and no repository `acme/nope`.
 * A fixture that can have a repository the service is not granted access to names it `uninstalledRepo`
 * (it has the same files, on `main` at `sha` too). Pull request 5 of `acme/shop`, from branch `feature`,
 * has its head at `sha` (to a host without pull requests, `feature` points there); no pull request 6 nor
 * branch `gone` exists.
 */

const root = mkdtempSync(join(tmpdir(), 'source-host-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const FILES = { 'preview.yaml': 'apps: {}\n', 'src/app.js': 'console.log(1)\n' };

interface Fixture {
  host: SourceHost;
  sha: string;
  uninstalledRepo?: string;
}

/** Every byte of a stream; rejects when the stream errors. */
async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks);
}

function sourceHostContract(name: string, setup: () => Fixture | Promise<Fixture>) {
  describe(`${name} honours the SourceHost contract`, () => {
    let host: SourceHost;
    let sha: string;
    let uninstalledRepo: string | undefined;
    beforeAll(async () => {
      ({ host, sha, uninstalledRepo } = await setup());
    });

    test('an installation exists for a reachable repository, none for an unknown one', async () => {
      expect(await host.installation('acme/shop')).toEqual({ installationId: expect.any(String) });
      expect(await host.installation('acme/nope')).toBeUndefined();
    });

    test('resolveBranch: found, ref-not-found, repository-not-found', async () => {
      expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'found', sha });
      expect(await host.resolveBranch('acme/shop', 'no-such-branch')).toEqual({ kind: 'ref-not-found' });
      // A repository that does not exist is, to a GitHub App, one no installation covers: either outcome.
      expect(['repository-not-found', 'no-installation']).toContain(
        (await host.resolveBranch('acme/nope', 'main')).kind,
      );
    });

    test("pullRequestHead: the pull request's head now; undefined for none", async () => {
      expect(await host.pullRequestHead('acme/shop', { number: 5, headRef: 'feature' })).toBe(sha);
      expect(await host.pullRequestHead('acme/shop', { number: 6, headRef: 'gone' })).toBeUndefined();
      expect(await host.pullRequestHead('acme/nope', { number: 5, headRef: 'feature' })).toBeUndefined();
    });

    test('hasCommit: the head, not a made-up SHA, not in another repository', async () => {
      expect(await host.hasCommit('acme/shop', sha)).toBe(true);
      expect(await host.hasCommit('acme/shop', 'f'.repeat(40))).toBe(false);
      expect(await host.hasCommit('acme/nope', sha)).toBe(false);
    });

    test('readFile: a file at a commit, undefined when absent', async () => {
      expect(await host.readFile('acme/shop', sha, 'preview.yaml')).toBe(FILES['preview.yaml']);
      expect(await host.readFile('acme/shop', sha, 'missing.txt')).toBeUndefined();
      expect(await host.readFile('acme/shop', 'f'.repeat(40), 'preview.yaml')).toBeUndefined();
    });

    test('checkout materializes the tree of a commit; an unknown commit throws', async () => {
      const dir = join(mkdtempSync(join(root, 'co-')), 'tree');
      await host.checkout('acme/shop', sha, dir);
      expect(readFileSync(join(dir, 'src/app.js'), 'utf8')).toBe(FILES['src/app.js']);
      expect(
        readdirSync(dir)
          .filter((f) => f !== '.git')
          .sort(),
      ).toEqual(['preview.yaml', 'src']);
      await expect(host.checkout('acme/shop', 'f'.repeat(40), join(root, 'co-bad'))).rejects.toThrow();
    });

    test('archive streams a gzipped tarball of the commit, every file under one top-level folder', async () => {
      const tgz = await drain(await host.archive('acme/shop', sha));
      const dir = mkdtempSync(join(root, 'ar-'));
      writeFileSync(join(dir, 'a.tgz'), tgz);
      const entries = execFileSync('tar', ['-tzf', join(dir, 'a.tgz')], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      const tops = new Set(entries.map((e) => e.split('/')[0]));
      expect(tops.size).toBe(1);
      mkdirSync(join(dir, 'x'));
      execFileSync('tar', ['-xzf', join(dir, 'a.tgz'), '--strip-components=1', '-C', join(dir, 'x')]);
      expect(readFileSync(join(dir, 'x', 'preview.yaml'), 'utf8')).toBe(FILES['preview.yaml']);
      expect(readFileSync(join(dir, 'x', 'src/app.js'), 'utf8')).toBe(FILES['src/app.js']);
      // An unknown commit gives no tarball: the promise rejects or the stream errors.
      const noTarball = (p: Promise<Readable>) => expect(p.then(drain)).rejects.toThrow();
      await noTarball(host.archive('acme/shop', 'f'.repeat(40)));
      await noTarball(host.archive('acme/nope', sha));
    });

    test('a repository no installation covers: no installation, no branch, no commit, no file', async () => {
      if (!uninstalledRepo) return; // this adapter has no such repositories
      expect(await host.installation(uninstalledRepo)).toBeUndefined();
      expect(await host.resolveBranch(uninstalledRepo, 'main')).toEqual({ kind: 'no-installation' });
      expect(await host.hasCommit(uninstalledRepo, sha)).toBe(false);
      expect(await host.pullRequestHead(uninstalledRepo, { number: 5, headRef: 'feature' })).toBeUndefined();
      expect(await host.readFile(uninstalledRepo, sha, 'preview.yaml')).toBeUndefined();
      await expect(host.archive(uninstalledRepo, sha).then(drain)).rejects.toThrow();
    });
  });
}

sourceHostContract('GitSourceHost', () => {
  const gitRoot = join(root, 'git');
  const sha = makeRepo(gitRoot, 'acme/shop', FILES);
  setBranch(gitRoot, 'acme/shop', 'feature', sha);
  return { host: new GitSourceHost(gitRoot), sha };
});

/*
 * The GitHub App adapter against the fake GitHub REST API, its credentials read from the fake Secrets
 * Manager (its client sent there through AWS_ENDPOINT_URL_SECRETS_MANAGER, as in the cloud tier).
 */
const github = new FakeGitHub();
const aws = new FakeAws(new URL('../../..', import.meta.url).pathname);
afterAll(async () => {
  await github.stop();
  await aws.stop();
});

sourceHostContract('GitHubAppSourceHost', async () => {
  await github.start();
  await aws.start();
  const { privateKey, publicKey } = appKeyPair();
  const secretArn = 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:preview/github-app-AbCdEf';
  aws.secrets.set(secretArn, JSON.stringify({ appId: '123456', privateKey, webhookSecret: 'whsec' }));
  github.addApp('123456', publicKey);
  github.addRepo('acme/shop');
  github.addRepo('acme/other');
  const sha = github.addCommit('acme/shop', FILES, 'main');
  // The same commit in a repository the App is not installed on.
  github.addCommit('acme/other', FILES, 'main', sha);
  github.setPull('acme/shop', 5, { headSha: sha, headRef: 'feature' });
  github.setPull('acme/other', 5, { headSha: sha, headRef: 'feature' });
  github.addInstallation(42, '123456', ['acme/shop']);
  process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = aws.url;
  const client = new SecretsManagerClient({
    region: 'eu-west-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const host = new GitHubAppSourceHost({
    credentials: new GitHubAppCredentials(client, secretArn),
    apiUrl: github.url,
  });
  return { host, sha, uninstalledRepo: 'acme/other' };
});
