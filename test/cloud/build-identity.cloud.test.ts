import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { imageBuildScripts, imageBuildSpec } from '../../lib/cdk/constructs/image-build-project.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, type Status, settled } from '../support/apps.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';
import { startGitHubCloud, stopGitHubCloud } from './github-cloud.js';

/*
 * Build identity in the cloud simulation tier (docs/builds.md): the real handlers in AWS mode,
 * the build inputs read through the fake GitHub's git data API, images looked up in (fake) ECR by the tag
 * of their identity, builds started on (fake) CodeBuild, whose `BUILDS` says which apps a build makes.
 */

const yaml = (buildArg = '1') => `apps:
  web:
    port: 3000
    context: web
  api:
    port: 4000
    context: api
    dockerfile: ../docker/api.Dockerfile
    buildArgs: { LEVEL: "${buildArg}" }
`;
const files = (over: Record<string, string> = {}) => ({
  'preview.yaml': yaml(),
  'web/Dockerfile': 'FROM scratch\nCOPY index.html /\n',
  'web/index.html': '<h1>one</h1>\n',
  'api/main.go': 'package main\n',
  'docker/api.Dockerfile': 'FROM scratch\nCOPY main.go /\n',
  'README.md': 'two apps\n',
  ...over,
});

let cloud: Cloud;
let kube: FakeKubernetes;
let github: FakeGitHub;
let org: OrgCredentials;
let sha: string;

beforeAll(async () => {
  ({ cloud, kube, github, org, sha } = await startGitHubCloud('identity', files()));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const path = (pr: number) => `/v1/preview/environments/acme/shop/${pr}`;
type Entry = { app: string; tag: string; commit: string; buildArgs: Record<string, string>; cache: string };
const entries = (n: number): Entry[] => JSON.parse(cloud.aws.builds[n]!.env.BUILDS!) as Entry[];
const imageOf = (pr: number, app: string) => {
  const ns = namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: pr });
  const image = kube.get('deployments', ns, app)?.spec.template.spec.containers[0].image as
    | string
    | undefined;
  if (!image) throw new Error(`no deployment of ${app} for PR ${pr}`);
  return image;
};
/** The status with its additive `builds`. */
type WithBuilds = Status & { builds?: Record<string, { result: string; commit: string }> };

/** Deploy a PR at a commit; play every build it starts to success; return its settled status and its builds. */
async function deploy(pr: number, commit: string) {
  const before = cloud.aws.builds.length;
  const res = await call(cloud, 'POST', '/v1/preview/environments', {
    body: { repoFullName: 'acme/shop', prNumber: pr, headSha: commit, headRef: `feature-${pr}` },
    headers: bearer(org),
  });
  expect(res.status).toBe(202);
  return settle(pr, before);
}

async function settle(pr: number, before: number) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const s = await pollUntil(cloud, org, path(pr), () => true);
    if (s.status === 'building' && s.phase === 'building-images') {
      const open = cloud.aws.builds.slice(before).filter((b) => b.status === 'IN_PROGRESS');
      for (const b of open)
        await cloud.invoke(
          'functions/events/image-build-finished.ts',
          cloud.aws.finishBuild(b.id, 'SUCCEEDED'),
        );
    }
    if (settled(s) && s.status !== 'pending') break;
    if (Date.now() > deadline) throw new Error(`PR ${pr} did not settle: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const status: WithBuilds = await pollUntil(cloud, org, path(pr), settled, 60_000);
  return { status, builds: cloud.aws.builds.slice(before).map((_, i) => entries(before + i)) };
}

describe('an app is built once per identity, whatever the commit or pull request', () => {
  let first: Awaited<ReturnType<typeof deploy>>;

  test('the first deploy builds both apps, with their build args and layer caches', async () => {
    first = await deploy(1, sha);
    expect(first.status).toMatchObject({ status: 'ready' });
    expect(first.builds).toHaveLength(1);
    const built = first.builds[0]!;
    expect(built.map((e) => e.app).sort()).toEqual(['api', 'web']);
    const api = built.find((e) => e.app === 'api')!;
    expect(api).toMatchObject({ commit: sha, buildArgs: { LEVEL: '1' } });
    expect(api.cache).toMatch(/^buildcache-[0-9a-f]{16}$/);
    expect(first.status.builds).toEqual({
      web: { result: 'built', commit: sha },
      api: { result: 'built', commit: sha },
    });
    // The inputs came from GitHub's git data API at the commit.
    expect(github.calls()).toContain(`GET /repos/acme/shop/git/commits/${sha}`);
  }, 90_000);

  test('a commit touching only web/, in another PR: one build of web; api reused from PR 1', async () => {
    const next = github.addCommit('acme/shop', files({ 'web/index.html': '<h1>two</h1>\n' }));
    const second = await deploy(2, next);
    expect(second.status.status).toBe('ready');
    expect(second.builds).toHaveLength(1);
    expect(second.builds[0]!.map((e) => e.app)).toEqual(['web']);
    expect(second.status.builds).toEqual({
      web: { result: 'built', commit: next },
      api: { result: 'reused', commit: sha },
    });
    expect(imageOf(2, 'api')).toBe(imageOf(1, 'api'));
    expect(imageOf(2, 'web')).not.toBe(imageOf(1, 'web'));
  }, 90_000);

  test('a change elsewhere in the repository (README) builds nothing', async () => {
    const docs = github.addCommit('acme/shop', files({ 'README.md': 'two apps, documented\n' }));
    const third = await deploy(3, docs);
    expect(third.status.status).toBe('ready');
    expect(third.builds).toEqual([]);
    expect(third.status.builds).toEqual({
      web: { result: 'reused', commit: sha },
      api: { result: 'reused', commit: sha },
    });
  }, 90_000);

  test('a change to the Dockerfile outside the context builds that app again', async () => {
    const commit = github.addCommit(
      'acme/shop',
      files({ 'docker/api.Dockerfile': 'FROM scratch\nCOPY main.go /srv/\n' }),
    );
    const r = await deploy(4, commit);
    expect(r.builds.map((b) => b.map((e) => e.app))).toEqual([['api']]);
    expect(r.status.builds).toMatchObject({ api: { result: 'built', commit }, web: { result: 'reused' } });
  }, 90_000);

  test('a change to a build argument builds that app again', async () => {
    const commit = github.addCommit('acme/shop', files({ 'preview.yaml': yaml('2') }));
    const r = await deploy(5, commit);
    expect(r.builds.map((b) => b.map((e) => e.app))).toEqual([['api']]);
    expect(r.builds[0]![0]!.buildArgs).toEqual({ LEVEL: '2' });
    expect(r.status.builds).toMatchObject({ api: { result: 'built', commit }, web: { result: 'reused' } });
  }, 90_000);

  test('rebuild forces a new image that only the asking environment takes', async () => {
    const before = cloud.aws.builds.length;
    const identityTag = first.builds[0]!.find((e) => e.app === 'web')!.tag;
    const shared = imageOf(1, 'web');
    expect(imageOf(3, 'web')).toBe(shared); // PR 3 reused PR 1's web
    const res = await call(cloud, 'PATCH', `${path(1)}/apps/web`, {
      body: { mode: 'rebuild' },
      headers: bearer(org),
    });
    expect(res.status).toBe(202);
    const r = await settle(1, before);
    expect(r.status.status).toBe('ready');
    expect(r.builds).toHaveLength(1);
    const forced = r.builds[0]!;
    expect(forced.map((e) => e.app)).toEqual(['web']);
    // A tag of its own (the identity and a build number): the identity's tag still names the first image.
    expect(forced[0]!.tag).toMatch(new RegExp(`^${identityTag}-b\\d+$`));
    const rebuilt = imageOf(1, 'web');
    expect(rebuilt).not.toBe(shared);
    expect(imageOf(3, 'web')).toBe(shared); // the other environment is untouched
    expect(r.status.builds).toMatchObject({ web: { result: 'built', commit: sha } });
    // Another PR deploying the same inputs afterwards takes the identity's image, not the forced one.
    const again = github.addCommit('acme/shop', files({ 'README.md': 'again\n' }));
    const other = await deploy(6, again);
    expect(other.builds).toEqual([]);
    expect(imageOf(6, 'web')).toBe(shared);

    // The rebuilding environment's own whole redeploy at the same head keeps its rebuilt image.
    const whole = cloud.aws.builds.length;
    const api = imageOf(1, 'api');
    const redeploy = await call(cloud, 'PATCH', path(1), { headers: bearer(org) });
    expect(redeploy.status).toBe(202);
    const kept = await settle(1, whole);
    expect(kept.status.status).toBe('ready');
    expect(kept.builds).toEqual([]);
    expect(imageOf(1, 'web')).toBe(rebuilt);
    expect(imageOf(1, 'api')).toBe(api);
    expect(kept.status.builds).toMatchObject({ web: { result: 'reused', commit: sha } });
    // Another environment at the same identity, redeployed as a whole, keeps the first image.
    const elsewhere = await call(cloud, 'PATCH', path(3), { headers: bearer(org) });
    expect(elsewhere.status).toBe(202);
    const third = await settle(3, cloud.aws.builds.length);
    expect(third.builds).toEqual([]);
    expect(imageOf(3, 'web')).toBe(shared);
  }, 120_000);
});

describe('the buildspec', () => {
  test('builds with BuildKit and a registry layer cache in the image repository', () => {
    // The buildspec carries the scripts base64; they are what the build runs.
    const spec = imageBuildSpec() as { env: { variables: Record<string, string> } };
    expect(Buffer.from(spec.env.variables.PREVIEW_BUILD_SCRIPT!, 'base64').toString('utf8')).toBe(
      `${imageBuildScripts().build}\n`,
    );
    const script = JSON.stringify(imageBuildScripts().build);
    expect(script).toContain('docker buildx build');
    expect(script).toContain('--cache-from \\"type=registry,ref=$cache\\"');
    expect(script).toContain(
      '--cache-to \\"type=registry,ref=$cache,mode=max,image-manifest=true,oci-mediatypes=true\\"',
    );
    expect(script).toContain(
      'cache=\\"$IMAGE_REPOSITORY_URI:$(jq -r \'.cache // (\\"buildcache-\\" + .app)\'',
    );
    expect(script).toContain('--build-arg=');
  });
});
