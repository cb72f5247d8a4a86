import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, type Status, settled } from '../support/apps.js';
import {
  BUILD_LOG_GROUP,
  type Cloud,
  GITHUB_APP_SECRET_ARN,
  IMAGE_REPOSITORY,
  startCloud,
} from './cloud-tier.js';
import { appKeyPair, FakeGitHub, faults } from './fakes/github.js';

/*
 * The cloud path, part 1, in the cloud simulation tier: the real handlers and steps in PREVIEW_MODE=aws,
 * GitHub behind the fake REST API, S3, CodeBuild, ECR, CloudWatch Logs, Secrets Manager and Step Functions
 * behind the AWS fake, DynamoDB on dynalite. A deploy fetches and stages the source, reads preview.yaml,
 * starts an image build and waits on its callback; the CodeBuild completion event (delivered to the real
 * event handler, as EventBridge would) ends the wait. Running the images is part 2 (EKS): until then the
 * deploy ends `failed` at DeployApps saying so.
 */

const PREVIEW_YAML = `apps:
  web:
    port: 3000
    health: /healthz
  api:
    port: 4000
    dockerfile: api/Dockerfile
    context: api
`;
const APP_ID = '424242';
const INSTALLATION = 7;

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let sha: string;
let tenancy: typeof import('../../functions/core/applications/applications.js');

const logs: string[] = [];
beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  github = await new FakeGitHub().start();
  const keys = appKeyPair();
  github.addApp(APP_ID, keys.publicKey);
  github.addRepo('acme/shop');
  github.addRepo('acme/uninstalled');
  github.addInstallation(INSTALLATION, APP_ID, ['acme/shop']);
  sha = github.addCommit(
    'acme/shop',
    { 'preview.yaml': PREVIEW_YAML, Dockerfile: 'FROM scratch\n', 'api/Dockerfile': 'FROM scratch\n' },
    'main',
  );
  github.addCommit('acme/uninstalled', { 'preview.yaml': PREVIEW_YAML }, 'main');
  cloud = await startCloud({ GITHUB_API_URL: github.url });
  cloud.aws.secrets.set(
    GITHUB_APP_SECRET_ARN,
    JSON.stringify({ appId: APP_ID, privateKey: keys.privateKey, webhookSecret: 'hook-secret' }),
  );
  tenancy = await import('../../functions/core/applications/applications.js');
  org = await tenancy.createOrganization('cloud');
  for (const repoFullName of ['acme/shop', 'acme/uninstalled', 'acme/vanished'])
    await tenancy.createApplication({ orgId: org.orgId, repoFullName });
}, 60_000);
afterAll(async () => {
  await cloud?.stop();
  await github?.stop();
}, 30_000);

const path = (pr: number, repo = 'acme/shop') => `/v1/preview/environments/${repo}/${pr}`;
async function deploy(pr: number, over: Record<string, unknown> = {}) {
  const res = await call(cloud, 'POST', '/v1/preview/environments', {
    body: { repoFullName: 'acme/shop', prNumber: pr, headSha: sha, headRef: 'feature', ...over },
    headers: bearer(org),
  });
  expect(res.status).toBe(202);
}
const status = (pr: number, repo?: string) => pollUntil(cloud, org, path(pr, repo), () => true);
/** The builds started so far, newest last. */
const builds = () => cloud.aws.builds;
async function waitForBuilds(count: number) {
  const deadline = Date.now() + 20_000;
  while (builds().length < count) {
    if (Date.now() > deadline) throw new Error(`expected ${count} builds, saw ${builds().length}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return builds()[count - 1]!;
}
/** Deliver CodeBuild's terminal event for a build to the real event handler. */
async function finish(buildId: string, outcome: 'SUCCEEDED' | 'FAILED', lines: string[] = []) {
  const event = cloud.aws.finishBuild(buildId, outcome, lines);
  return cloud.invoke<{ outcome: string }>('functions/events/image-build-finished.ts', event);
}

describe('a deploy in AWS mode', () => {
  let deployedBuilds: number;

  test('fetches from GitHub, stages the source in S3, builds on CodeBuild and waits for its callback', async () => {
    await deploy(1);
    const build = await waitForBuilds(1);
    const waiting = await status(1);
    expect(waiting).toMatchObject({ status: 'building', phase: 'building-images' });

    // Source staged once, under the org, repository and commit, as GitHub's tarball.
    const key = `preview-artifacts/sources/${org.orgId}/acme/shop/${sha}.tar.gz`;
    const staged = cloud.aws.objects.get(key);
    expect(staged).toBeDefined();
    expect(gunzipSync(staged!.body).includes(Buffer.from('preview.yaml'))).toBe(true);

    // One build of both apps, from their dockerfiles and contexts, tagged per app and commit.
    expect(build.projectName).toBe('preview-images');
    expect(build.env).toMatchObject({
      SOURCE_BUCKET: 'preview-artifacts',
      SOURCE_KEY: `sources/${org.orgId}/acme/shop/${sha}.tar.gz`,
      IMAGE_REPOSITORY_URI: IMAGE_REPOSITORY,
    });
    const specs = JSON.parse(build.env.BUILDS!) as {
      app: string;
      dockerfile: string;
      context: string;
      tag: string;
    }[];
    expect(specs.map(({ app, dockerfile, context }) => ({ app, dockerfile, context }))).toEqual([
      { app: 'web', dockerfile: 'Dockerfile', context: '.' },
      { app: 'api', dockerfile: 'api/Dockerfile', context: 'api' },
    ]);
    // Tagged per app and build identity (its inputs, not the commit).
    for (const s of specs) expect(s.tag).toMatch(/^[0-9a-f]{16}-[0-9a-f]{40}$/);
    expect(new Set(specs.map((s) => s.tag)).size).toBe(2);
    // The task token never goes to the build (CodeBuild's events echo its environment).
    expect(Object.keys(build.env).sort()).toEqual([
      'BUILDS',
      'IMAGE_REPOSITORY_URI',
      'PREVIEW_BUILD_REF',
      'SOURCE_BUCKET',
      'SOURCE_KEY',
    ]);
    expect(JSON.stringify(build.env)).not.toMatch(/task|token/i);

    // The callback: CodeBuild's completion event ends the wait; the next step (EKS, part 2) fails clearly.
    expect(await finish(build.id, 'SUCCEEDED')).toEqual({ outcome: 'completed' });
    const after = await pollUntil(cloud, org, path(1), settled);
    expect(after.status).toBe('failed');
    expect(after.error).toMatch(/images are built, but no EKS cluster is configured to run them/);
    deployedBuilds = builds().length;
  }, 60_000);

  test('a redelivered completion event changes nothing', async () => {
    const build = builds()[0]!;
    expect(await finish(build.id, 'SUCCEEDED')).toEqual({ outcome: 'ignored' });
  });

  test('a whole redeploy at the same commit reuses the images: no new build', async () => {
    const res = await call(cloud, 'PATCH', path(1), { headers: bearer(org) });
    expect(res.status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));
    const after = await pollUntil(cloud, org, path(1), settled);
    expect(after.error).toMatch(/no EKS cluster is configured/);
    expect(builds()).toHaveLength(deployedBuilds);
  }, 30_000);

  test('an app redeploy in rebuild mode builds that app again; restart builds nothing', async () => {
    const rebuild = await call(cloud, 'PATCH', `${path(1)}/apps/web`, {
      body: { mode: 'rebuild' },
      headers: bearer(org),
    });
    expect(rebuild.status).toBe(202);
    const build = await waitForBuilds(deployedBuilds + 1);
    expect((JSON.parse(build.env.BUILDS!) as { app: string }[]).map((b) => b.app)).toEqual(['web']);
    await finish(build.id, 'SUCCEEDED');
    await pollUntil(cloud, org, path(1), settled);

    const restart = await call(cloud, 'PATCH', `${path(1)}/apps/web`, {
      body: { mode: 'restart' },
      headers: bearer(org),
    });
    expect(restart.status).toBe(202);
    await new Promise((r) => setTimeout(r, 300));
    await pollUntil(cloud, org, path(1), settled);
    expect(builds()).toHaveLength(deployedBuilds + 1);
  }, 60_000);

  test('a failed build fails the environment with the last lines of its log and where the full log is', async () => {
    const before = builds().length;
    const next = github.addCommit('acme/shop', {
      'preview.yaml': PREVIEW_YAML,
      Dockerfile: 'FROM nowhere\n',
    });
    await deploy(2, { headSha: next });
    const build = await waitForBuilds(before + 1);
    await finish(build.id, 'FAILED', [
      'Step 1/3 : FROM nowhere',
      'pull access denied for nowhere, repository does not exist',
      'PREVIEW-BUILD-FAILED app=web: docker build exited 1',
    ]);
    const failed = await pollUntil(cloud, org, path(2), settled);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(
      /^image build failed for web, api: app web: docker build exited 1; last output: /,
    );
    expect(failed.error).toContain('pull access denied for nowhere');
    expect(failed.error).toContain(
      `; full log: previewctl envs logs web --repo acme/shop --pr 2 --source build, or CloudWatch Logs ${BUILD_LOG_GROUP} / ${build.logs.streamName}`,
    );
  }, 60_000);

  test('state transitions per deploy do not depend on how long the build takes', async () => {
    const transitionsOf = async (pr: number, buildMs: number) => {
      const commit = github.addCommit('acme/shop', {
        'preview.yaml': PREVIEW_YAML,
        Dockerfile: `FROM scratch # ${pr}\n`,
      });
      const before = builds().length;
      await deploy(pr, { headSha: commit });
      const build = await waitForBuilds(before + 1);
      await new Promise((r) => setTimeout(r, buildMs));
      await finish(build.id, 'SUCCEEDED');
      await pollUntil(cloud, org, path(pr), settled);
      await cloud.aws.workflows.idle();
      const runs = [...cloud.aws.workflows.executions.values()].filter(
        (e) => e.workflow === 'deploy' && (e.input as { envKey: string }).envKey === `acme/shop#${pr}`,
      );
      return runs.map((e) => e.transitions);
    };
    const quick = await transitionsOf(3, 50);
    const slow = await transitionsOf(4, 1500);
    expect(quick).toHaveLength(1);
    expect(slow).toEqual(quick);
  }, 60_000);
});

describe('what GitHub says, as the deploy reports it', () => {
  const failedWith = async (pr: number, body: Record<string, unknown>) => {
    await deploy(pr, body);
    const s: Status = await pollUntil(
      cloud,
      org,
      path(pr, String(body.repoFullName ?? 'acme/shop')),
      settled,
    );
    expect(s.status).toBe('failed');
    return s.error ?? '';
  };

  test('an unknown commit', async () => {
    expect(await failedWith(10, { headSha: 'f'.repeat(40) })).toBe(
      `commit ${'f'.repeat(40)} not found in acme/shop`,
    );
  }, 30_000);

  test('a repository no installation of the App covers', async () => {
    expect(await failedWith(11, { repoFullName: 'acme/uninstalled' })).toMatch(/acme\/uninstalled not found/);
  }, 30_000);

  test('a repository that does not exist', async () => {
    expect(await failedWith(12, { repoFullName: 'acme/vanished' })).toMatch(/acme\/vanished not found/);
  }, 30_000);

  test('GitHub answering 5xx is retried, and the deploy goes on', async () => {
    const before = builds().length;
    const commit = github.addCommit('acme/shop', {
      'preview.yaml': PREVIEW_YAML,
      Dockerfile: 'FROM scratch # 5xx\n',
    });
    github.failNext(new RegExp(`/repos/acme/shop/commits/${commit}`), 2, faults.serverError());
    await deploy(13, { headSha: commit });
    await waitForBuilds(before + 1);
    const calls = github.calls().filter((c) => c.includes(`/commits/${commit}`));
    expect(calls.length).toBeGreaterThanOrEqual(3);
  }, 30_000);
});

describe('POST /v1/preview/applications/{id}/0 against GitHub', () => {
  // The org's application for the repository (one per repository and organization).
  const mainDeploy = async (repoFullName: string) => {
    const app =
      (await tenancy.findApplicationByRepo(org.orgId, repoFullName)) ??
      (await tenancy.createApplication({ orgId: org.orgId, repoFullName }));
    return call(cloud, 'POST', `/v1/preview/applications/${app.applicationId}/0`, { headers: bearer(org) });
  };

  test('202 with the main branch head GitHub reports', async () => {
    const res = await mainDeploy('acme/shop');
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ repoFullName: 'acme/shop', branch: 'main', headSha: sha, prNumber: 0 });
  });

  test('409 when no installation of the App covers the repository', async () => {
    const res = await mainDeploy('acme/uninstalled');
    expect(res.status).toBe(409);
    expect(res.body.error).toMatch(/no active installation/);
  });

  test('404 when the repository has no main branch', async () => {
    github.addRepo('acme/trunkless', 'develop');
    github.addCommit('acme/trunkless', { 'preview.yaml': PREVIEW_YAML }, 'develop');
    github.addInstallation(INSTALLATION + 1, APP_ID, ['acme/trunkless']);
    const res = await mainDeploy('acme/trunkless');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'main branch ref not found' });
  });
});
