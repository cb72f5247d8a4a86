import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { SERVER_JS } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

const PREVIEW_YAML =
  'apps:\n  web:\n    port: 3000\n    command: node server.js web\n  api:\n    port: 4000\n    command: node server.js api\n';

const h = localServerForFile();
let webSha: string;
let auth: Record<string, string>;

const deployBody = (over: Record<string, unknown> = {}) => ({
  repoFullName: 'acme/web',
  prNumber: 7,
  headSha: webSha,
  headRef: 'feature/x',
  ...over,
});
const settle = () => h.service.workflows.idle();

beforeAll(async () => {
  webSha = makeRepo(h.gitRoot, 'acme/web', {
    'preview.yaml': PREVIEW_YAML,
    'server.js': SERVER_JS,
    VERSION: '1',
  });
  makeRepo(h.gitRoot, 'acme/broken', { 'preview.yaml': 'apps:\n  Web_App:\n    port: 3000\n' });
  makeRepo(h.gitRoot, 'acme/trunkless', { 'README.md': 'x' }, 'develop');
  auth = bearer(h.org);
  for (const repo of ['acme/web', 'acme/ghost', 'acme/broken2']) await linkRepo(h.org, repo);
});

describe('POST /v1/preview/environments', () => {
  test('202 with the status path, then the pipeline runs to ready with a URL per app', async () => {
    const res = await call(h, 'POST', '/v1/preview/environments', { body: deployBody(), headers: auth });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: true,
      repoFullName: 'acme/web',
      prNumber: 7,
      statusUrl: '/v1/preview/environments/acme/web/7',
      environmentId: expect.stringMatching(/^[a-z0-9]{20,32}$/),
    });
    await settle();
    const status = await call(h, 'GET', res.body.statusUrl, { headers: auth });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      repoFullName: 'acme/web',
      prNumber: 7,
      status: 'ready',
      lastDeployedSha: webSha,
      urls: { web: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), api: expect.any(String) },
    });
    expect(Object.keys(status.body).sort()).toEqual(
      [
        // Additive: `apps` (the apps preview.yaml declares) and `builds` (built or reused).
        'apps',
        'builds',
        'createdAt',
        'environmentId',
        'lastDeployedSha',
        'prNumber',
        'repoFullName',
        'status',
        'updatedAt',
        'urls',
      ].sort(),
    );
  });

  test('deprecated cloneUrl and baseRef are accepted and ignored', async () => {
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody({
        prNumber: 8,
        cloneUrl: 'https://example.com/x.git',
        baseRef: 'main',
        baseSha: webSha,
      }),
      headers: auth,
    });
    expect(res.status).toBe(202);
  });

  test.each([
    [
      'a missing commit',
      { prNumber: 20, headSha: 'f'.repeat(40) },
      `commit ${'f'.repeat(40)} not found in acme/web`,
    ],
    ['a missing repository', { prNumber: 21, repoFullName: 'acme/ghost' }, 'repository acme/ghost not found'],
  ])('%s ends failed with an error that names it', async (_name, over, message) => {
    const body = deployBody(over);
    expect((await call(h, 'POST', '/v1/preview/environments', { body, headers: auth })).status).toBe(202);
    await settle();
    const status = await call(h, 'GET', `/v1/preview/environments/${body.repoFullName}/${body.prNumber}`, {
      headers: auth,
    });
    expect(status.body.status).toBe('failed');
    expect(status.body.error).toContain(message);
  });

  test('a broken preview.yaml ends failed naming the field', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/broken2', { 'preview.yaml': 'apps:\n  web:\n    port: "x"\n' });
    await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody({ repoFullName: 'acme/broken2', headSha: sha }),
      headers: auth,
    });
    await settle();
    const status = await call(h, 'GET', '/v1/preview/environments/acme/broken2/7', { headers: auth });
    expect(status.body.status).toBe('failed');
    expect(status.body.error).toMatch(/^preview\.yaml: apps\.web\.port: /);
  });

  const bad: [string, unknown][] = [
    ['malformed JSON', '{"repoFullName":'],
    ['an empty body', ''],
    ['an array', [deployBody()]],
    ['a JSON string', '"hello"'],
    ['null', 'null'],
    ['a missing repoFullName', { prNumber: 3, headSha: 'abcdef1', headRef: 'x' }],
    ['a repoFullName without owner', deployBody({ repoFullName: 'web' })],
    ['a repoFullName with three parts', deployBody({ repoFullName: 'a/b/c' })],
    ['an owner starting with a hyphen', deployBody({ repoFullName: '-acme/web' })],
    ['prNumber 0', deployBody({ prNumber: 0 })],
    ['a negative prNumber', deployBody({ prNumber: -1 })],
    ['a fractional prNumber', deployBody({ prNumber: 1.5 })],
    ['prNumber as a string', deployBody({ prNumber: '7' })],
    ['prNumber written 7.0', JSON.stringify(deployBody()).replace('"prNumber":7', '"prNumber":7.0')],
    ['prNumber written 7e0', JSON.stringify(deployBody()).replace('"prNumber":7', '"prNumber":7e0')],
    ['a missing headSha', deployBody({ headSha: undefined })],
    ['a headSha that is not hex', deployBody({ headSha: 'not-a-sha' })],
    ['a missing headRef', deployBody({ headRef: undefined })],
    ['a numeric headRef', deployBody({ headRef: 5 })],
  ];
  test.each(bad)('400 for %s, and nothing is stored', async (_name, body) => {
    const before = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    const res = await call(h, 'POST', '/v1/preview/environments', { body, headers: auth });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
    expect(typeof res.body.error).toBe('string');
    const after = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(after.body).toEqual(before.body);
    expect((await call(h, 'GET', '/v1/preview/environments/acme/web/3', { headers: auth })).status).toBe(404);
  });

  test('401 without credentials or with a wrong key', async () => {
    const none = await call(h, 'POST', '/v1/preview/environments', { body: deployBody() });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({
      error:
        'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    });
    const wrong = `${h.org.apiKey.slice(0, -4)}AAAA`;
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody(),
      headers: { authorization: `Bearer ${wrong}` },
    });
    expect(res.status).toBe(401);
    const clientCreds = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody(),
      headers: { 'svc-client-id': h.org.clientId, 'svc-client-secret': h.org.clientSecret },
    });
    expect(clientCreds.status).toBe(401);
    // A wrong key and the wrong kind of credential say the same: what this route takes.
    expect(res.body).toEqual(none.body);
    expect(clientCreds.body).toEqual(none.body);
  });
});

describe('GET, DELETE and PATCH /v1/preview/environments/{owner}/{repo}/{pr}', () => {
  test.each(['1e3', '1.5', '-1', 'abc', '%20', '0x1', '+1'])(
    '400 for pr=%s on GET and DELETE',
    async (pr) => {
      for (const method of ['GET', 'DELETE']) {
        const res = await call(h, method, `/v1/preview/environments/acme/web/${pr}`, { headers: auth });
        expect(res.status).toBe(400);
        expect(res.body.error).toMatch(/pr must be a non-negative integer/);
      }
    },
  );

  test('404 for an environment that does not exist', async () => {
    const res = await call(h, 'GET', '/v1/preview/environments/acme/web/999', { headers: auth });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'environment not found' });
    expect((await call(h, 'PATCH', '/v1/preview/environments/acme/web/999', { headers: auth })).status).toBe(
      404,
    );
    const app = await call(h, 'PATCH', '/v1/preview/environments/acme/web/999/apps/web', { headers: auth });
    expect(app.status).toBe(404);
  });

  test('repository names are case-insensitive, as on GitHub', async () => {
    const res = await call(h, 'GET', '/v1/preview/environments/ACME/Web/7', { headers: auth });
    expect(res.status).toBe(200);
    expect(res.body.repoFullName).toBe('acme/web');
  });

  test('PATCH redeploys at the stored head; app redeploys default to rebuild; unknown apps 404', async () => {
    const res = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ accepted: true, repoFullName: 'acme/web', prNumber: 7 });
    await settle();
    const app = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/api', { headers: auth });
    expect(app.status).toBe(202);
    expect(app.body).toEqual({
      accepted: true,
      repoFullName: 'acme/web',
      prNumber: 7,
      app: 'api',
      mode: 'rebuild',
    });
    // One redeploy at a time: a second one while the first is in flight is refused, not interleaved.
    const busy = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/web', { headers: auth });
    expect(busy.status).toBe(409);
    expect(busy.body).toEqual({
      error: 'a deploy of this environment is in progress; retry once it is ready or failed',
    });
    await settle();
    const restart = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/web', {
      body: { mode: 'restart' },
      headers: auth,
    });
    expect(restart.status).toBe(202);
    expect(restart.body.mode).toBe('restart');
    const unknown = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/worker', {
      headers: auth,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: 'app not found' });
    await settle();
  });

  test.each([
    ['an unknown mode', { mode: 'reboot' }],
    ['a numeric mode', { mode: 1 }],
    ['an array body', ['restart']],
    ['malformed JSON', '{"mode"'],
  ])('400 for an app redeploy with %s', async (_name, body) => {
    const res = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/web', {
      body,
      headers: auth,
    });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['error']);
  });

  test('400 for an app name that is not a DNS label', async () => {
    const res = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/Web_App', { headers: auth });
    expect(res.status).toBe(400);
  });

  test('teardown: 202, torn_down, then both redeploys answer 409; a new POST brings it back', async () => {
    const del = await call(h, 'DELETE', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(del.status).toBe(202);
    expect(del.body).toEqual({ accepted: true, repoFullName: 'acme/web', prNumber: 7 });
    // Redeploys are refused as soon as the teardown is accepted, not only once it finishes.
    expect((await call(h, 'PATCH', '/v1/preview/environments/acme/web/7', { headers: auth })).status).toBe(
      409,
    );
    await settle();
    const status = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(status.body).toMatchObject({ status: 'torn_down', urls: {} });
    expect(status.body.error).toBeUndefined();
    const patch = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(patch.status).toBe(409);
    expect(patch.body).toEqual({ error: 'environment was torn down' });
    const app = await call(h, 'PATCH', '/v1/preview/environments/acme/web/7/apps/web', { headers: auth });
    expect(app.status).toBe(409);
    const again = await call(h, 'POST', '/v1/preview/environments', { body: deployBody(), headers: auth });
    expect(again.status).toBe(202);
    const back = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(back.body.status).toBe('pending');
    await settle();
  });

  test('teardown of an environment that does not exist answers 202 and creates nothing', async () => {
    const res = await call(h, 'DELETE', '/v1/preview/environments/acme/web/4242', { headers: auth });
    expect(res.status).toBe(202);
    expect((await call(h, 'GET', '/v1/preview/environments/acme/web/4242', { headers: auth })).status).toBe(
      404,
    );
  });

  test('an environment that predates redeploy support answers 409 to both redeploys', async () => {
    const now = new Date().toISOString();
    await ddb().send(
      new PutCommand({
        TableName: table('environments'),
        Item: {
          orgId: h.org.orgId,
          envKey: 'acme/legacy#5',
          repoFullName: 'acme/legacy',
          prNumber: 5,
          status: 'ready',
          createdAt: now,
          updatedAt: now,
          urls: { web: 'https://legacy.example.com' },
          generation: 1,
          apps: ['web'],
        },
      }),
    );
    const status = await call(h, 'GET', '/v1/preview/environments/acme/legacy/5', { headers: auth });
    expect(status.body).toMatchObject({ status: 'ready', urls: { web: 'https://legacy.example.com' } });
    const patch = await call(h, 'PATCH', '/v1/preview/environments/acme/legacy/5', { headers: auth });
    expect(patch.status).toBe(409);
    expect(patch.body).toEqual({ error: 'environment predates redeploy support' });
    const app = await call(h, 'PATCH', '/v1/preview/environments/acme/legacy/5/apps/web', { headers: auth });
    expect(app.status).toBe(409);
  });
});

describe('POST /v1/preview/applications/{applicationId}/0', () => {
  test('deploys the linked repository main branch as environment 0', async () => {
    // acme/web's application exists (linked above): a repository has one per organization.
    const app = { applicationId: await linkRepo(h.org, 'acme/web') };
    const res = await call(h, 'POST', `/v1/preview/applications/${app.applicationId}/0`, { headers: auth });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      accepted: true,
      applicationId: app.applicationId,
      repoFullName: 'acme/web',
      branch: 'main',
      headSha: webSha,
      prNumber: 0,
      statusUrl: '/v1/preview/environments/acme/web/0',
      environmentId: expect.stringMatching(/^[a-z0-9]{20,32}$/),
    });
    await settle();
    const status = await call(h, 'GET', '/v1/preview/environments/acme/web/0', { headers: auth });
    expect(status.status).toBe(200);
    expect(status.body.prNumber).toBe(0);
  });

  test.each([
    ['disabled', { repoFullName: 'acme/web-disabled', disabled: true }, 'application is disabled'],
    ['unlinked', {}, 'application is not linked to a repository'],
    [
      'without an installation',
      { repoFullName: 'acme/web-uninstalled', installationActive: false },
      'application has no active installation',
    ],
  ])('409 for an application that is %s', async (_name, props, error) => {
    const app = await createApplication({ orgId: h.org.orgId, ...props });
    const res = await call(h, 'POST', `/v1/preview/applications/${app.applicationId}/0`, { headers: auth });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error });
  });

  test.each([
    ['the application', undefined, 'application not found'],
    ['the linked repository', 'acme/nowhere', 'linked repository not found'],
    ['the main branch ref', 'acme/trunkless', 'main branch ref not found'],
  ])('404 when %s is missing', async (_name, repoFullName, error) => {
    const id = repoFullName
      ? (await createApplication({ orgId: h.org.orgId, repoFullName })).applicationId
      : 'doesnotexist0000000000000';
    const res = await call(h, 'POST', `/v1/preview/applications/${id}/0`, { headers: auth });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error });
  });
});

describe('organization scoping', () => {
  test("another org sees 404 for everything of this org's, and its teardown changes nothing", async () => {
    const other = await h.newOrg();
    const theirs = bearer(other);
    const mine = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(mine.status).toBe(200);
    for (const [method, path] of [
      ['GET', '/v1/preview/environments/acme/web/7'],
      ['PATCH', '/v1/preview/environments/acme/web/7'],
      ['PATCH', '/v1/preview/environments/acme/web/7/apps/web'],
    ] as const) {
      const res = await call(h, method, path, { headers: theirs });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'environment not found' });
    }
    const del = await call(h, 'DELETE', '/v1/preview/environments/acme/web/7', { headers: theirs });
    expect(del.status).toBe(202);
    await settle();
    const after = await call(h, 'GET', '/v1/preview/environments/acme/web/7', { headers: auth });
    expect(after.body).toEqual(mine.body);
    const app = { applicationId: await linkRepo(h.org, 'acme/web') };
    const main = await call(h, 'POST', `/v1/preview/applications/${app.applicationId}/0`, {
      headers: theirs,
    });
    expect(main.status).toBe(404);
    expect(main.body).toEqual({ error: 'application not found' });
  });
});

describe('routing', () => {
  test('unknown routes and methods answer 404 with an error body', async () => {
    for (const [method, path] of [
      ['GET', '/v1/nope'],
      ['PUT', '/v1/preview/environments'],
      ['GET', '/v1/preview/environments/acme/web/7/extra/segments'],
    ]) {
      const res = await call(h, method!, path!, { headers: auth });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'route not found' });
    }
  });

  test('GET /healthz answers without credentials', async () => {
    const res = await call(h, 'GET', '/healthz');
    expect(res.status).toBe(200);
  });

  test('every request logs one structured line without credentials', () => {
    const lines = h.logs.map((l) => JSON.parse(l)).filter((l) => l.message === 'request');
    expect(lines.length).toBeGreaterThan(10);
    for (const l of lines) {
      expect(l).toEqual(expect.objectContaining({ route: expect.any(String), status: expect.any(Number) }));
      expect(typeof l.latencyMs).toBe('number');
    }
    expect(h.logs.join('\n')).not.toContain(h.org.apiKey);
  });
});

// Hardening: each test reproduces the attack that found the hole.
describe('a deploy needs the repository to belong to the caller', () => {
  const tableItems = async () => {
    const { ScanCommand } = await import('@aws-sdk/lib-dynamodb');
    const { Items } = await ddb().send(new ScanCommand({ TableName: table('environments') }));
    return (Items ?? []).map((i) => `${i.orgId}/${i.envKey}@${i.generation}`).sort();
  };

  test('a repository no application of the org links answers 404 naming it; nothing stored or started', async () => {
    makeRepo(h.gitRoot, 'acme/unlinked', { 'preview.yaml': PREVIEW_YAML, 'server.js': SERVER_JS });
    const before = await tableItems();
    const executions = h.service.workflows.executions.size;
    // An existing repository and one that exists nowhere answer alike: nothing to probe.
    for (const repoFullName of ['acme/unlinked', 'acme/nowhere-at-all']) {
      const res = await call(h, 'POST', '/v1/preview/environments', {
        body: deployBody({ repoFullName, prNumber: 31 }),
        headers: auth,
      });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({
        error: `repository ${repoFullName} is not linked to an application of this organization`,
      });
    }
    expect(await tableItems()).toEqual(before);
    expect(h.service.workflows.executions.size).toBe(executions);
    const status = await call(h, 'GET', '/v1/preview/environments/acme/unlinked/31', { headers: auth });
    expect(status.status).toBe(404);
  });

  test("another organization cannot deploy (and so run) this org's repository", async () => {
    const other = await h.newOrg('intruder');
    const before = await tableItems();
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody({ prNumber: 32 }),
      headers: bearer(other),
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toContain('acme/web');
    expect(await tableItems()).toEqual(before);
  });

  test('a case variant of the name deploys the same environment under the name the application links', async () => {
    const first = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody({ prNumber: 33 }),
      headers: auth,
    });
    expect(first.status).toBe(202);
    await settle();
    const upper = await call(h, 'POST', '/v1/preview/environments', {
      body: deployBody({ repoFullName: 'ACME/WEB', prNumber: 33 }),
      headers: auth,
    });
    expect(upper.status).toBe(202);
    expect(upper.body).toMatchObject({
      repoFullName: 'acme/web',
      statusUrl: '/v1/preview/environments/acme/web/33',
    });
    await settle();
    const status = await call(h, 'GET', '/v1/preview/environments/ACME/WEB/33', { headers: auth });
    expect(status.body).toMatchObject({ status: 'ready', repoFullName: 'acme/web' });
    expect(status.body.error).toBeUndefined();
  });
});

describe('teardown of an environment that never deployed anything', () => {
  test('ends torn_down without asking the runtime to remove anything', async () => {
    const runtime = h.service.runtime;
    const original = runtime.teardown.bind(runtime);
    let calls = 0;
    runtime.teardown = async (target) => {
      calls++;
      return original(target);
    };
    try {
      // The commit does not exist: the deploy fails before the preview config is read.
      const body = deployBody({ prNumber: 34, headSha: 'e'.repeat(40) });
      expect((await call(h, 'POST', '/v1/preview/environments', { body, headers: auth })).status).toBe(202);
      await settle();
      const path = '/v1/preview/environments/acme/web/34';
      expect((await call(h, 'GET', path, { headers: auth })).body.status).toBe('failed');
      expect((await call(h, 'DELETE', path, { headers: auth })).status).toBe(202);
      await settle();
      const status = await call(h, 'GET', path, { headers: auth });
      expect(status.body).toMatchObject({ status: 'torn_down', urls: {} });
      expect(status.body.error).toBeUndefined();
      expect(calls).toBe(0);
    } finally {
      runtime.teardown = original;
    }
  });
});
