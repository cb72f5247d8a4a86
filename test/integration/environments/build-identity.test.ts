import { beforeAll, describe, expect, test } from '@jest/globals';
import { bearer, call, linkRepo } from '../../support/api.js';
import { BUILD_JS, hit, pollUntil, SERVER_JS, type Status, settled } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * Build identity, locally (docs/builds.md): the real local server, apps built as processes from
 * a git repository on disk. Each build writes a random stamp, which the app serves: a reused build output
 * serves the stamp of the build it came from. The inputs are read with `git rev-parse <sha>:<path>`.
 */

const yaml = (level = '1') => `apps:
  web:
    port: 3000
    context: web
    build: node build.js web
    command: node server.js web
    health: /healthz
  api:
    port: 3001
    context: api
    dockerfile: ../docker/api.Dockerfile
    buildArgs: { LEVEL: "${level}" }
    build: node build.js api
    command: node server.js api
    health: /healthz
`;
const REPO = 'acme/two';

const h = localServerForFile();
let auth: Record<string, string>;
let c1: string;
type WithBuilds = Status & { builds?: Record<string, { result: string; commit: string }> };

beforeAll(async () => {
  auth = bearer(h.org);
  c1 = makeRepo(h.gitRoot, REPO, {
    'preview.yaml': yaml(),
    'server.js': SERVER_JS,
    'build.js': BUILD_JS,
    VERSION: 'one',
    'web/index.txt': 'web one\n',
    'api/main.txt': 'api one\n',
    'docker/api.Dockerfile': 'FROM scratch\n',
    'README.md': 'two apps\n',
  });
  await linkRepo(h.org, REPO);
});

const path = (pr: number) => `/v1/preview/environments/${REPO}/${pr}`;
async function deploy(pr: number, sha: string): Promise<WithBuilds> {
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: REPO, prNumber: pr, headSha: sha, headRef: `f${pr}` },
    headers: auth,
  });
  expect(res.status).toBe(202);
  const s = await pollUntil(h, h.org, path(pr), (x) => settled(x) && x.lastDeployedSha === sha, 60_000);
  expect(s).toMatchObject({ status: 'ready' });
  return s;
}
const stamps = async (s: Status) => ({
  web: (await hit(s.urls.web!)).stamp as string,
  api: (await hit(s.urls.api!)).stamp as string,
});
const commit = (files: Record<string, string>) => commitFiles(h.gitRoot, REPO, files);

describe('local builds are reused by identity across pull requests', () => {
  let first: { web: string; api: string };
  let webAt2: string;
  /** The stamp of PR 1's rebuild of web. */
  let rebuiltWeb: string;

  test('the first deploy builds both apps', async () => {
    const s = await deploy(1, c1);
    expect(s.builds).toEqual({ web: { result: 'built', commit: c1 }, api: { result: 'built', commit: c1 } });
    first = await stamps(s);
    expect(first.web).toMatch(/^0\.\d+/);
  }, 90_000);

  test('a commit touching only web/, in another PR: web is built, api is PR 1’s build', async () => {
    const c2 = commit({ 'web/index.txt': 'web two\n' });
    const s = await deploy(2, c2);
    expect(s.builds).toEqual({ web: { result: 'built', commit: c2 }, api: { result: 'reused', commit: c1 } });
    const now = await stamps(s);
    expect(now.api).toBe(first.api);
    expect(now.web).not.toBe(first.web);
    webAt2 = now.web;
  }, 90_000);

  test('a build argument changed: api is built again; web reused', async () => {
    const c3 = commit({ 'preview.yaml': yaml('2') });
    const s = await deploy(3, c3);
    expect(s.builds?.api).toEqual({ result: 'built', commit: c3 });
    expect(s.builds?.web?.result).toBe('reused');
    const now = await stamps(s);
    expect(now.api).not.toBe(first.api);
    expect(now.web).toBe(webAt2);
  }, 90_000);

  test('the Dockerfile outside the context changed: api is built again', async () => {
    const c4 = commit({ 'docker/api.Dockerfile': 'FROM scratch\nCOPY . /\n' });
    const s = await deploy(4, c4);
    expect(s.builds?.api).toEqual({ result: 'built', commit: c4 });
    expect(s.builds?.web?.result).toBe('reused');
  }, 90_000);

  test('rebuild forces a build that only the asking environment takes', async () => {
    const res = await call(h, 'PATCH', `${path(1)}/apps/web`, { body: { mode: 'rebuild' }, headers: auth });
    expect(res.status).toBe(202);
    const s: WithBuilds = await pollUntil(
      h,
      h.org,
      path(1),
      (x) => x.status === 'ready' && x.phase !== 'building-images',
      60_000,
    );
    // Wait for the rebuilt process: its stamp is new.
    let forced = first.web;
    const deadline = Date.now() + 30_000;
    while (forced === first.web && Date.now() < deadline) {
      forced = (await hit((await pollUntil(h, h.org, path(1), settled)).urls.web!)).stamp as string;
      if (forced === first.web) await new Promise((r) => setTimeout(r, 200));
    }
    expect(forced).not.toBe(first.web);
    expect(((await pollUntil(h, h.org, path(1), settled)) as WithBuilds).builds?.web).toEqual({
      result: 'built',
      commit: c1,
    });
    expect(s.status).toBe('ready');
    // Another PR at the same commit afterwards takes the identity's build, not the forced one.
    const other = await deploy(5, c1);
    expect(other.builds).toEqual({
      web: { result: 'reused', commit: c1 },
      api: { result: 'reused', commit: c1 },
    });
    expect((await stamps(other)).web).toBe(first.web);
    rebuiltWeb = forced;
  }, 120_000);

  test('a whole redeploy keeps what a rebuild built; another environment keeps the first build', async () => {
    // PR 1, whole, at the same head: web runs its rebuilt output (nothing built), api the identity's.
    const res = await call(h, 'PATCH', path(1), { headers: auth });
    expect(res.status).toBe(202);
    const s: WithBuilds = await pollUntil(h, h.org, path(1), settled, 60_000);
    expect(s).toMatchObject({ status: 'ready', lastDeployedSha: c1 });
    expect(s.builds).toEqual({
      web: { result: 'reused', commit: c1 },
      api: { result: 'reused', commit: c1 },
    });
    expect(await stamps(s)).toEqual({ web: rebuiltWeb, api: first.api });
    // PR 5, same identity, whole redeploy too: the first build, never PR 1's rebuild.
    expect((await call(h, 'PATCH', path(5), { headers: auth })).status).toBe(202);
    const other: WithBuilds = await pollUntil(h, h.org, path(5), settled, 60_000);
    expect(other.status).toBe('ready');
    expect((await stamps(other)).web).toBe(first.web);
  }, 120_000);
});
