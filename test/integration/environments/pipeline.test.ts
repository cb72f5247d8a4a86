import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { call } from '../../support/api.js';
import {
  alive,
  BUILD_JS,
  hit,
  pidFileBuild,
  pollUntil,
  SERVER_JS,
  type Status,
  settled,
  twoApps,
  waitForBuildPid,
} from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';

/*
 * The deploy pipeline end to end: real HTTP to the local server, the ASL state machines run in-process,
 * apps built and run as processes by the local runtime from a git repository on disk.
 */

// A short readiness timeout, so the failing-health-check case ends in seconds.
const h = localServerForFile({ env: { PREVIEW_READY_TIMEOUT_SECONDS: '3' } });

/** POST a deploy of `repo` PR `pr` at `sha` (202 expected). */
const deploy = (repo: string, pr: number, sha: string) => requestDeploy(h, repo, pr, sha);

/** A one-app preview.yaml. */
const oneApp = (fields: Record<string, string>) =>
  `apps:\n  web:\n    port: 3000\n${Object.entries(fields)
    .map(([k, v]) => `    ${k}: ${v}\n`)
    .join('')}`;
const appFiles = (yaml: string, version = 'v1') => ({
  'preview.yaml': yaml,
  'server.js': SERVER_JS,
  'build.js': BUILD_JS,
  VERSION: version,
});

const TWO_APPS = twoApps({ web: ['health: /healthz', 'env: { GREETING: hi, SHOW: "GREETING,API_TOKEN" }'] });

describe('a two-app preview, end to end', () => {
  const path = '/v1/preview/environments/acme/shop/1';
  let sha: string;
  let applicationId: string;
  let first: Status;

  beforeAll(async () => {
    sha = makeRepo(h.gitRoot, 'acme/shop', {
      'preview.yaml': TWO_APPS,
      'server.js': SERVER_JS,
      'build.js': BUILD_JS,
      VERSION: 'v1',
    });
    applicationId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/shop' }))
      .applicationId;
  });

  test('deploy → ready with a URL per app; both answer from the head SHA, with their plain env', async () => {
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: { repoFullName: 'acme/shop', prNumber: 1, headSha: sha, headRef: 'feature' },
      headers: h.auth,
    });
    expect(res.status).toBe(202);
    const phases = new Set<string>();
    first = await pollUntil(h, h.org, path, (s) => {
      phases.add(`${s.status}${s.phase ? `/${s.phase}` : ''}`);
      return settled(s);
    });
    expect(first).toMatchObject({ status: 'ready', lastDeployedSha: sha });
    expect(first.phase).toBeUndefined();
    expect(Object.keys(first.urls).sort()).toEqual(['api', 'web']);
    for (const url of Object.values(first.urls)) expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Callers see the pipeline move through its phases (sampled by polling, so at least these).
    expect(phases.has('building/building-images') || phases.has('deploying/waiting-ready')).toBe(true);

    const web = await hit(first.urls.web!);
    const api = await hit(first.urls.api!);
    expect(web).toMatchObject({ app: 'web', version: 'v1', env: { GREETING: 'hi', API_TOKEN: null } });
    expect(api).toMatchObject({ app: 'api', version: 'v1' });
    expect(web.stamp).toEqual(expect.any(String));
    // Logs are kept per app under the data dir.
    const log = readFileSync(
      h.service.runtime.logPath({ orgId: h.org.orgId, envKey: 'acme/shop#1' }, 'web'),
      'utf8',
    );
    expect(log).toContain(`build ${sha.slice(0, 12)}`);
  });

  test('restart: a new secret reaches the restarted app; its sibling process is untouched', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    const put = await call(h, 'PUT', `/v1/preview/secrets/${applicationId}/web/API_TOKEN`, {
      body: { value: 'tok-123' },
      headers: h.auth,
    });
    expect(put.status).toBe(200);

    const res = await call(h, 'PATCH', `${path}/apps/web`, { body: { mode: 'restart' }, headers: h.auth });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: true,
      repoFullName: 'acme/shop',
      prNumber: 1,
      app: 'web',
      mode: 'restart',
    });
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after.status).toBe('ready');
    expect(after.urls).toEqual(first.urls); // same ports: URLs survive a restart

    const web = await hit(after.urls.web!);
    expect(web.env).toEqual({ GREETING: 'hi', API_TOKEN: 'tok-123' });
    expect(web.pid).not.toBe(before.web.pid);
    expect(web.stamp).toBe(before.web.stamp); // restart reuses the existing build
    expect(await hit(after.urls.api!)).toEqual(before.api); // same process, same build
    // The secret value never reaches the service's own logs.
    expect(h.logs.join('\n')).not.toContain('tok-123');
  });

  test('rebuild: only that app is built and restarted', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    const res = await call(h, 'PATCH', `${path}/apps/api`, { headers: h.auth });
    expect(res.status).toBe(202);
    expect(res.body.mode).toBe('rebuild');
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after.status).toBe('ready');
    const api = await hit(after.urls.api!);
    expect(api.pid).not.toBe(before.api.pid);
    expect(api.stamp).not.toBe(before.api.stamp);
    expect(await hit(after.urls.web!)).toEqual(before.web);
  });

  test('whole redeploy: every app is restarted at the head SHA, from the build of its identity (docs/builds.md)', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    expect((await call(h, 'PATCH', path, { headers: h.auth })).status).toBe(202);
    await h.service.workflows.idle();
    const after = await pollUntil(h, h.org, path, settled);
    expect(after).toMatchObject({ status: 'ready', lastDeployedSha: sha });
    const web = await hit(after.urls.web!);
    const api = await hit(after.urls.api!);
    expect(web.pid).not.toBe(before.web.pid);
    expect(api.pid).not.toBe(before.api.pid);
    // Nothing is built again: the inputs are those built before, and api keeps what its rebuild built
    // (the environment's own: a whole redeploy never undoes a rebuild).
    expect(web.stamp).toBe(before.web.stamp);
    expect(api.stamp).toBe(before.api.stamp);
    expect((after as Status & { builds?: unknown }).builds).toEqual({
      web: { result: 'reused', commit: sha },
      api: { result: 'reused', commit: sha },
    });
    expect(web.env.API_TOKEN).toBe('tok-123');
  });

  test('teardown stops both apps; later redeploys answer 409', async () => {
    const status = await pollUntil(h, h.org, path, settled);
    const pids = ['web', 'api'].map(
      (app) => h.service.runtime.running({ orgId: h.org.orgId, envKey: 'acme/shop#1' }, app)!.pid,
    );
    expect((await call(h, 'DELETE', path, { headers: h.auth })).status).toBe(202);
    await h.service.workflows.idle();
    const down = await pollUntil(h, h.org, path, (s) => s.status === 'torn_down');
    expect(down.urls).toEqual({});
    for (const url of Object.values(status.urls)) expect(await hit(url)).toBeUndefined();
    for (const pid of pids) expect(alive(pid)).toBe(false);

    const whole = await call(h, 'PATCH', path, { headers: h.auth });
    expect(whole.status).toBe(409);
    expect(whole.body).toEqual({ error: 'environment was torn down' });
    const app = await call(h, 'PATCH', `${path}/apps/web`, { body: { mode: 'restart' }, headers: h.auth });
    expect(app.status).toBe(409);
  });
});

describe('failures end failed with an error that names the cause', () => {
  test.each([
    [
      'a failing build',
      oneApp({
        build: `node -e "console.error('boom - missing module left-pad'); process.exit(3)"`,
        command: 'node server.js',
      }),
      /^app web: build `node -e .*` failed \(exit code 3\); last output: boom - missing module left-pad; full log: previewctl envs logs web --repo acme\/fail-\d+ --pr 1 --source build$/,
    ],
    [
      'a failing health check',
      oneApp({
        command: `node -e "require('http').createServer((q,r)=>{r.writeHead(503);r.end()}).listen(process.env.PORT)"`,
        health: '/healthz',
      }),
      /^app web did not become ready within 3 s: GET \/healthz answered 503$/,
    ],
    [
      'an app that exits before it is ready',
      oneApp({ command: `node -e "console.log('no DATABASE_URL'); process.exit(1)"` }),
      /^app web exited \(exit code 1\) before it was ready; last output: no DATABASE_URL; full log: previewctl envs logs web --repo acme\/fail-\d+ --pr 1$/,
    ],
    [
      'an app without a command',
      oneApp({ dockerfile: 'Dockerfile' }),
      /^app web: preview\.yaml has no command; the local runtime needs one$/,
    ],
    [
      'a broken preview.yaml',
      'apps:\n  web:\n    port: 3000\n    comand: node server.js\n',
      /^preview\.yaml: apps\.web: Unrecognized key: "comand" \(in acme\/fail-\d+@[0-9a-f]{12}\)$/,
    ],
  ])('%s', async (name, yaml, error) => {
    const repo = `acme/fail-${name.length}`;
    const sha = makeRepo(h.gitRoot, repo, appFiles(yaml));
    const path = await deploy(repo, 1, sha);
    const status = await pollUntil(h, h.org, path, settled, 20_000);
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(error);
    expect(status.urls).toEqual({});
    await h.service.workflows.idle();
    // Nothing is left running for a failed environment's app that never became ready.
    const running = h.service.runtime.running({ orgId: h.org.orgId, envKey: `${repo}#1` }, 'web');
    if (running) expect(alive(running.pid)).toBe(name === 'a failing health check');
  });

  test('an app that prints its secret as it dies: the error quotes its output, never the secret', async () => {
    const yaml = oneApp({
      command: `node -e "console.error('cannot connect to', process.env.DB_URL); process.exit(2)"`,
    });
    const sha = makeRepo(h.gitRoot, 'acme/leaky', appFiles(yaml));
    const { applicationId } = await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/leaky' });
    const secret = 'postgres://admin:hunter2-very-secret@db:5432/app';
    const put = await call(h, 'PUT', `/v1/preview/secrets/${applicationId}/web/DB_URL`, {
      body: { value: secret },
      headers: h.auth,
    });
    expect(put.status).toBe(200);
    const status = await pollUntil(h, h.org, await deploy('acme/leaky', 1, sha), settled);
    expect(status.status).toBe('failed');
    expect(status.error).toBe(
      'app web exited (exit code 2) before it was ready; last output: cannot connect to [secret]; full log: previewctl envs logs web --repo acme/leaky --pr 1',
    );
    expect(h.logs.join('\n')).not.toContain('hunter2');
  });

  test('a missing repository and a missing SHA', async () => {
    const ghost = await deploy('acme/ghost-repo', 1, 'a'.repeat(40));
    expect(await pollUntil(h, h.org, ghost, settled)).toMatchObject({
      status: 'failed',
      error: 'repository acme/ghost-repo not found (or not accessible to the source host)',
    });
    makeRepo(h.gitRoot, 'acme/shaless', appFiles(oneApp({ command: 'node server.js' })));
    const shaless = await deploy('acme/shaless', 1, 'b'.repeat(40));
    expect(await pollUntil(h, h.org, shaless, settled)).toMatchObject({
      status: 'failed',
      error: `commit ${'b'.repeat(40)} not found in acme/shaless`,
    });
  });

  test('a preview.yaml with four mistakes: one failed deploy tells all four, where it read them', async () => {
    const yaml = [
      'apps:',
      '  Web_App:',
      '    port: 3000',
      '    comand: node server.js',
      '  api:',
      '    port: "8000"',
      '    health: healthz',
      '',
    ].join('\n');
    const sha = makeRepo(h.gitRoot, 'acme/four-mistakes', appFiles(yaml));
    const status = await pollUntil(h, h.org, await deploy('acme/four-mistakes', 1, sha), settled);
    expect(status.status).toBe('failed');
    expect(status.error).toMatch(
      new RegExp(`^preview\\.yaml has 4 problems \\(in acme/four-mistakes@${sha.slice(0, 12)}\\): `),
    );
    for (const problem of [
      'apps.Web_App: Unrecognized key: "comand"',
      'apps.Web_App: app names must be lower-case DNS labels',
      'apps.api.port: Invalid input: expected number, received string',
      'apps.api.health: must be a path starting with /',
    ])
      expect(status.error).toContain(problem);
  });
});

describe('ordering', () => {
  test('two deploys of one PR race: the newer SHA wins, the older never overwrites it', async () => {
    // The older commit builds slowly; the newer one is pushed while it is still building.
    const slow = oneApp({ build: `node -e "setTimeout(()=>{},1500)"`, command: 'node server.js web' });
    const fast = oneApp({ command: 'node server.js web' });
    const older = makeRepo(h.gitRoot, 'acme/race', appFiles(slow, 'older'));
    const newer = commitFiles(h.gitRoot, 'acme/race', appFiles(fast, 'newer'));
    const path = await deploy('acme/race', 1, older);
    await pollUntil(h, h.org, path, (s) => s.phase === 'building-images');
    await deploy('acme/race', 1, newer);
    await h.service.workflows.idle(); // both executions have ended: nothing late can land after this
    const status = await pollUntil(h, h.org, path, settled);
    expect(status).toMatchObject({ status: 'ready', lastDeployedSha: newer });
    expect((await hit(status.urls.web!)).version).toBe('newer');
    const runs = [...h.service.workflows.executions.values()].filter((e) => e.input.envKey === 'acme/race#1');
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded']); // the older one ended quietly
  });

  test('a newer deploy supersedes an older one that is already waiting for readiness', async () => {
    const slowStart = oneApp({
      command: `node -e "setTimeout(()=>require('./server.js'),1500)" web`,
      health: '/healthz',
    });
    const older = makeRepo(h.gitRoot, 'acme/race2', appFiles(slowStart, 'older'));
    const newer = commitFiles(
      h.gitRoot,
      'acme/race2',
      appFiles(oneApp({ command: 'node server.js web' }), 'newer'),
    );
    const path = await deploy('acme/race2', 1, older);
    await pollUntil(h, h.org, path, (s) => s.phase === 'waiting-ready');
    await deploy('acme/race2', 1, newer);
    await h.service.workflows.idle();
    const status = await pollUntil(h, h.org, path, settled);
    expect(status).toMatchObject({ status: 'ready', lastDeployedSha: newer });
    expect((await hit(status.urls.web!)).version).toBe('newer');
  });

  test('a teardown mid-build wins: torn_down, and no build or app process is left', async () => {
    // The build writes its pid into its own working copy (a sandboxed build sees nothing else).
    const yaml = oneApp({ build: pidFileBuild('build.pid', 10_000), command: 'node server.js' });
    const sha = makeRepo(h.gitRoot, 'acme/doomed', appFiles(yaml));
    const path = await deploy('acme/doomed', 1, sha);
    await pollUntil(h, h.org, path, (s) => s.phase === 'building-images');
    const buildPid = await waitForBuildPid(
      join(h.dataDir, 'work', h.org.orgId, 'acme', 'doomed', '1'),
      'build.pid',
    );
    expect(alive(buildPid)).toBe(true);

    expect((await call(h, 'DELETE', path, { headers: h.auth })).status).toBe(202);
    await h.service.workflows.idle();
    const status = await pollUntil(h, h.org, path, (s) => s.status === 'torn_down');
    expect(status.urls).toEqual({});
    expect(alive(buildPid)).toBe(false);
    expect(h.service.runtime.running({ orgId: h.org.orgId, envKey: 'acme/doomed#1' }, 'web')).toBeUndefined();
    const runs = [...h.service.workflows.executions.values()].filter(
      (e) => e.input.envKey === 'acme/doomed#1',
    );
    expect(runs.map((r) => [r.workflow, r.status])).toEqual([
      ['deploy', 'succeeded'], // superseded: ended quietly, changed nothing
      ['teardown', 'succeeded'],
    ]);
  });
});
