import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { namespaceName } from '../../functions/ports/runtime/eks/objects.js';
import { setLogSink } from '../../functions/shared/log.js';
import { MASK } from '../../functions/shared/masking/mask.js';
import { bearer, call } from '../support/api.js';
import { pollUntil, settled } from '../support/apps.js';
import { BUILD_LOG_GROUP, type Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';
import { startGitHubCloud, stopGitHubCloud } from './github-cloud.js';

/*
 * GET …/apps/{app}/logs in the cloud simulation tier: the real handler in PREVIEW_MODE=aws reads a failed
 * CodeBuild build's log from (fake) CloudWatch Logs and a running app's from its pods on (fake) EKS,
 * through the real @kubernetes/client-node; a failed build's status error leads with the cause in its log.
 */

const PREVIEW_YAML = `apps:
  web:
    port: 3000
`;
const SECRET = 'cloud-logs-secret-7b1e"quoted';

let cloud: Cloud;
let kube: FakeKubernetes;
let github: FakeGitHub;
let org: OrgCredentials;
let applicationId: string;
let sha: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, kube, github, org, applicationId, sha } = await startGitHubCloud('logs', {
    'preview.yaml': PREVIEW_YAML,
    Dockerfile: 'FROM scratch\n',
  }));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const auth = () => bearer(org);
const path = (pr: number) => `/v1/preview/environments/acme/shop/${pr}`;
const ns = (pr: number) => namespaceName({ orgId: org.orgId, repoFullName: 'acme/shop', prNumber: pr });

async function deploy(pr: number, headSha = sha) {
  const res = await call(cloud, 'POST', '/v1/preview/environments', {
    body: { repoFullName: 'acme/shop', prNumber: pr, headSha, headRef: 'feature' },
    headers: auth(),
  });
  expect(res.status).toBe(202);
}
/** Wait for build number `count` and deliver its terminal event to the real handler. */
async function finishBuild(count: number, outcome: 'SUCCEEDED' | 'FAILED', lines: string[] = []) {
  const deadline = Date.now() + 20_000;
  while (cloud.aws.builds.length < count) {
    if (Date.now() > deadline) throw new Error(`no build #${count}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const build = cloud.aws.builds[count - 1]!;
  await cloud.invoke(
    'functions/events/image-build-finished.ts',
    cloud.aws.finishBuild(build.id, outcome, lines),
  );
  return build;
}

/**
 * What the build script printed for an app whose Dockerfile's `RUN node build.js` required a missing file
 * (BuildKit's plain progress, then the script's verdict); the fake CodeBuild echoes the template's own
 * buildspec commands around it, as CodeBuild does.
 */
const BUILD_OUTPUT = [
  'PREVIEW-BUILD app=web: building ./Dockerfile as 000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps:x',
  '#0 building with "preview" instance using docker-container driver',
  '#6 [3/4] RUN node build.js',
  '#6 0.412 node:internal/modules/cjs/loader:1228',
  '#6 0.412   throw err;',
  "#6 0.413 Error: Cannot find module './missing-config.json'",
  '#6 0.413 Require stack:',
  '#6 0.413 - /app/build.js',
  '#6 0.415 Node.js v20.20.2',
  '#6 ERROR: process "/bin/sh -c node build.js" did not complete successfully: exit code: 1',
  '------',
  ' > [3/4] RUN node build.js:',
  '------',
  'Dockerfile:3',
  '--------------------',
  '   3 | >>> RUN node build.js',
  '--------------------',
  'ERROR: failed to solve: process "/bin/sh -c node build.js" did not complete successfully: exit code: 1',
  'PREVIEW-BUILD-FAILED app=web: docker buildx build of ./Dockerfile failed: process "/bin/sh -c node build.js" did not complete successfully: exit code: 1',
];

describe('logs in AWS mode', () => {
  test("a failed build: the error names the app, the failing command and the build's own output", async () => {
    await deploy(1);
    const build = await finishBuild(1, 'FAILED', BUILD_OUTPUT);
    const status = await pollUntil(cloud, org, path(1), settled);
    expect(status).toMatchObject({ status: 'failed', phase: 'building-images' });
    expect(status.error).toMatch(
      /^#6 0\.413 Error: Cannot find module '\.\/missing-config\.json' \(image build failed for web: app web: docker buildx build of \.\/Dockerfile failed: process "\/bin\/sh -c node build\.js" did not complete successfully: exit code: 1\); last output: /,
    );
    expect(status.error).toContain(
      '| ERROR: failed to solve: process "/bin/sh -c node build.js" did not complete successfully: exit code: 1; full log: previewctl envs logs web --repo acme/shop --pr 1 --source build, or CloudWatch Logs ',
    );
    expect(status.error).toContain(build.logs.streamName);
    // Nothing of the buildspec's script text: CodeBuild echoed one short command per line.
    for (const script of ['is not set', 'set -euo', 'jq ', 'PREVIEW_BUILD_SCRIPT', 'Running command'])
      expect(status.error).not.toContain(script);

    const log = await call(cloud, 'GET', `${path(1)}/apps/web/logs?source=build`, { headers: auth() });
    expect(log.status).toBe(200);
    expect(log.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    // The build's own output, whole: CodeBuild's `[Container]` lines (the commands it echoed, its phases,
    // the command that failed) are left out, as the error leaves them out.
    expect(log.text).toBe(`${BUILD_OUTPUT.join('\n')}\n`);
    for (const codebuild of ['[Container]', 'Running command', 'Phase context', 'set -euo pipefail', 'jq -r'])
      expect(log.text).not.toContain(codebuild);
    const tail = await call(cloud, 'GET', `${path(1)}/apps/web/logs?source=build&tail=2`, {
      headers: auth(),
    });
    expect(tail.text).toBe(`${BUILD_OUTPUT.slice(-2).join('\n')}\n`);
    // Nothing ran: no pods, so no app log.
    const app = await call(cloud, 'GET', `${path(1)}/apps/web/logs`, { headers: auth() });
    expect(app.status).toBe(404);
    expect(app.body).toEqual({ error: 'app web has no output (yet): it has not been started' });
  }, 60_000);

  test("a running app: its pods' log through client-node, the secret masked in every form", async () => {
    const put = await call(cloud, 'PUT', `/v1/preview/secrets/${applicationId}/web/TOKEN`, {
      body: { value: SECRET },
      headers: auth(),
    });
    expect(put.status).toBe(200);
    kube.setLogs(ns(2), 'web', [
      'booting web',
      `token ${SECRET}`,
      JSON.stringify({ token: SECRET }),
      `basic ${Buffer.from(SECRET).toString('base64')}`,
      'listening on 3000',
    ]);
    await deploy(2);
    await finishBuild(2, 'SUCCEEDED', ['Successfully built']);
    expect(await pollUntil(cloud, org, path(2), settled, 60_000)).toMatchObject({ status: 'ready' });

    const log = await call(cloud, 'GET', `${path(2)}/apps/web/logs`, { headers: auth() });
    expect(log.status).toBe(200);
    expect(log.text).toMatch(/^--- pod web-[\w-]+ \(Running, ready\) ---\nbooting web\n/);
    expect(log.text).toContain(`token ${MASK}\n`);
    expect(log.text).toContain(`{"token":"${MASK}"}\n`);
    expect(log.text).toContain(`basic ${MASK}\n`);
    expect(log.text.endsWith('listening on 3000\n')).toBe(true);
    for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1), Buffer.from(SECRET).toString('base64')])
      expect(log.text).not.toContain(form);
    const build = await call(cloud, 'GET', `${path(2)}/apps/web/logs?source=build`, { headers: auth() });
    expect(build.text).toBe('Successfully built\n');

    // Another organization: the same 404 as for no environment; bad input: a JSON 400.
    const tenancy = await import('../../functions/core/applications/applications.js');
    const other = await tenancy.createOrganization('other');
    const foreign = await call(cloud, 'GET', `${path(2)}/apps/web/logs`, { headers: bearer(other) });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'environment not found' });
    const bad = await call(cloud, 'GET', `${path(2)}/apps/web/logs?tail=-1`, { headers: auth() });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain('tail must be a whole number of lines from 1 to 10000');
    expect(logs.join('\n')).not.toContain('cloud-logs-secret');
  }, 90_000);

  test('a running build: its log so far, from the project’s log group, before the build ends', async () => {
    // A commit no image exists for yet (the one above was built).
    const next = github.addCommit(
      'acme/shop',
      { 'preview.yaml': PREVIEW_YAML, Dockerfile: 'FROM node:22-slim\n' },
      'feature',
    );
    const count = cloud.aws.builds.length + 1;
    await deploy(3, next);
    const deadline = Date.now() + 20_000;
    while (cloud.aws.builds.length < count) {
      if (Date.now() > deadline) throw new Error(`no build #${count}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const build = cloud.aws.builds[count - 1]!;
    expect(build.logs.groupName).toBe(BUILD_LOG_GROUP);
    cloud.aws.logBuild(build.id, ['Step 1/4 : FROM node:22-slim', 'Step 2/4 : COPY . .']);
    expect(await pollUntil(cloud, org, path(3), (s) => s.phase === 'building-images')).toMatchObject({
      status: 'building',
    });

    const running = await call(cloud, 'GET', `${path(3)}/apps/web/logs?source=build`, { headers: auth() });
    expect(running.status).toBe(200);
    expect(running.text).toBe('Step 1/4 : FROM node:22-slim\nStep 2/4 : COPY . .\n');
    cloud.aws.logBuild(build.id, ['Step 3/4 : RUN npm ci']);
    const more = await call(cloud, 'GET', `${path(3)}/apps/web/logs?source=build&tail=1`, {
      headers: auth(),
    });
    expect(more.text).toBe('Step 3/4 : RUN npm ci\n');

    await finishBuild(count, 'FAILED', ['PREVIEW-BUILD-FAILED app=web: docker build exited 1']);
    expect(await pollUntil(cloud, org, path(3), settled)).toMatchObject({ status: 'failed' });
  }, 60_000);

  test("a failed build that printed a secret value: the environment's error and its build log read [secret]", async () => {
    // web's bundle holds SECRET (the test above); a commit whose build prints it (from a repository file).
    const next = github.addCommit(
      'acme/shop',
      { 'preview.yaml': PREVIEW_YAML, Dockerfile: 'FROM node:22-slim\nRUN node seed.js\n' },
      'feature',
    );
    const count = cloud.aws.builds.length + 1;
    await deploy(4, next);
    await finishBuild(count, 'FAILED', [
      '#7 [2/2] RUN node seed.js',
      `#7 0.3 Error: password authentication failed: ${SECRET}`,
      `#7 ERROR: process "/bin/sh -c node seed.js --token ${SECRET}" did not complete successfully: exit code: 1`,
      `PREVIEW-BUILD-FAILED app=web: docker buildx build of ./Dockerfile failed: process "/bin/sh -c node seed.js --token ${SECRET}" did not complete successfully: exit code: 1`,
    ]);
    const status = await pollUntil(cloud, org, path(4), settled);
    expect(status).toMatchObject({ status: 'failed', phase: 'building-images' });
    expect(status.error).toContain(`Error: password authentication failed: ${MASK}`);
    expect(status.error).toContain(
      `app web: docker buildx build of ./Dockerfile failed: process "/bin/sh -c node seed.js --token ${MASK}"`,
    );
    const log = await call(cloud, 'GET', `${path(4)}/apps/web/logs?source=build`, { headers: auth() });
    expect(log.status).toBe(200);
    expect(log.text).toContain(`password authentication failed: ${MASK}\n`);
    for (const text of [JSON.stringify(status), log.text, logs.join('\n')])
      for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1)]) expect(text).not.toContain(form);
  }, 60_000);
});
