import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { testRunShortId } from '../../../functions/core/recipes/versions.js';
import { recoverRuns } from '../../../functions/core/runs/recovery.js';
import { FACTORY_SECRET_APP, FACTORY_SECRET_VAR } from '../../../functions/core/scenarios/factory.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { keys } from '../../../functions/manifest/tables.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded } from '../../support/runs-app.js';
import { factoryAppForFile } from '../../support/runs-suite.js';

/*
 * Scenario data, end to end: a fixture web app that needs a signed-in user and a fixture Environment Factory
 * (apps `web` and `factory` of one preview, preview.yaml `factory: {app: factory, path: /_preview/factory}`),
 * deployed through the local pipeline; runs of tests naming a scenario provision it through the factory.
 */

const h = localServerForFile();
const app = factoryAppForFile(h);

const reportUrls = new Map<string, string>();
const startRun = async (testId: string) => {
  const res = await call(h, 'POST', `/test/${testId}/run`, { headers: client(h.org), body: {} });
  expect(res.status).toBe(201);
  reportUrls.set(res.body.run_id, res.body.url);
  return res.body.run_id as string;
};
const receivedFor = async (runId: string) =>
  (await app.received()).filter((r) => r.body?.testRunId === runId);

describe('a test with a scenario', () => {
  let runId: string;
  let run: any;
  beforeAll(async () => {
    runId = await startRun(
      await app.importTest({
        steps: [
          {
            interaction: 'assert-text',
            instruction: 'The page says "Signed in as qa+"',
            element: { html: '', selector: '#who' },
          },
          // The header the factory answered was sent with the page's request.
          {
            interaction: 'assert-visible',
            instruction: 'the run id',
            element: { html: '', selector: '#run:not(:empty)' },
          },
        ],
      }),
    );
    run = await runEnded(h, runId);
  }, 120_000);

  test('passes: the session cookie and header the factory answered reached the browser', () => {
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
    expect(run.steps[0].output).toContain('found "Signed in as qa+"');
  });

  test('up was signed, carried the run ids and the recipe with both tokens substituted; down followed', async () => {
    const got = await receivedFor(runId);
    expect(got.map((r) => [r.body.action, r.verified])).toEqual([
      ['up', true],
      ['down', true],
    ]);
    const short = testRunShortId(runId);
    const up = got[0]!.body;
    expect(up).toEqual({
      action: 'up',
      testRunId: runId,
      testRunShortId: short,
      scenario: { setupId: app.setupId, version: 1, name: 'signed-in' },
      create: {
        users: [
          {
            _alias: 'u1',
            email: `qa+${short}@example.com`,
            tags: [`run-${runId}`, { deep: [`x-${short}-y`] }],
          },
        ],
        sessions: [{ user: { _ref: 'u1' }, label: `${runId}/${short}` }],
      },
    });
    expect(got[1]!.body).toEqual({
      action: 'down',
      testRunId: runId,
      scenario: { setupId: app.setupId, version: 1, name: 'signed-in' },
      refs: { email: `qa+${short}@example.com` },
    });
    // The signature is the HMAC of the raw body with the secret mounted as PREVIEW_FACTORY_SECRET.
    const secret = (
      await secretStore().read({ applicationId: app.applicationId, app: FACTORY_SECRET_APP })
    )?.[FACTORY_SECRET_VAR];
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    expect(got[0]!.signature).toBe(createHmac('sha256', secret!).update(JSON.stringify(up)).digest('hex'));
  });

  test('the run records its provisioning in metadata and on its report page', async () => {
    expect(run.metadata).toMatchObject({
      scenario: { setup_id: app.setupId, recipe: 'signed-in', version: 1, status: 'down' },
      test_run_id: runId,
      test_run_short_id: testRunShortId(runId),
      scenario_up_ms: expect.any(Number),
      scenario_down_ms: expect.any(Number),
    });
    const page = await (await fetch(reportUrls.get(runId)!)).text();
    expect(page).toContain('id="scenario"');
    expect(page).toContain('scenario signed-in (setup');
    expect(page).toContain(`testRunId ${runId} / ${testRunShortId(runId)}`);
  });
});

test('a tampered body is refused by the fixture verifier', async () => {
  const got = await app.received();
  const signed = got.find((r) => r.verified)!;
  const tampered = JSON.stringify({ ...signed.body, testRunId: 'someone-else' });
  const res = await fetch(`${app.main.urls.factory}/_preview/factory`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-signature': signed.signature! },
    body: tampered,
  });
  expect(res.status).toBe(401);
  expect((await app.received()).at(-1)).toMatchObject({ verified: false });
});

test('without provisioning the same steps fail: the web app needs the session', async () => {
  const out = await importTests(h.org.orgId, [
    {
      name: 'No scenario',
      folder: { id: 'account', name: 'Account' },
      application_id: app.applicationId,
      application_version: { name: 'web', path: '/' },
      steps: [
        {
          interaction: 'assert-text',
          instruction: 'The page says "Signed in as qa+"',
          element: { html: '', selector: '#who' },
        },
      ],
      step_timeout_seconds: 2,
    },
  ]);
  const run = await runEnded(h, await startRun(out.tests[0]!.id));
  expect(run.status).toBe('failed');
}, 60_000);

test('down is sent after a failing step', async () => {
  const testId = await app.importTest({
    step_timeout_seconds: 2,
    steps: [
      {
        interaction: 'assert-text',
        instruction: 'The page says "Nobody here"',
        element: { html: '', selector: '#who' },
      },
    ],
  });
  const runId = await startRun(testId);
  const run = await runEnded(h, runId);
  expect(run.status).toBe('failed');
  expect(run.steps[0].status).toBe('failed');
  expect((await receivedFor(runId)).map((r) => r.body.action)).toEqual(['up', 'down']);
  expect(run.metadata.scenario.status).toBe('down');
}, 60_000);

test('up answering 503 twice then 200 succeeds', async () => {
  const runId = await startRun(
    await app.importTest({ scenario: { setup_id: app.setupId, recipe: 'flaky' } }),
  );
  const run = await runEnded(h, runId);
  expect(run.error).toBeUndefined();
  expect(run.status).toBe('passed');
  expect((await receivedFor(runId)).map((r) => r.body.action)).toEqual(['up', 'up', 'up', 'down']);
}, 60_000);

test('up answering 400 fails the run with the answer and skips its steps', async () => {
  const runId = await startRun(
    await app.importTest({ scenario: { setup_id: app.setupId, recipe: 'refuse' } }),
  );
  const run = await runEnded(h, runId);
  expect(run.status).toBe('failed');
  expect(run.error).toContain('scenario "refuse"');
  expect(run.error).toContain('400 {"error":"unknown model widgets"}');
  expect(run.steps.map((s: any) => s.status)).toEqual(['skipped']);
  expect(run.metadata).toMatchObject({
    scenario: { status: 'up_failed' },
    scenario_error: expect.any(String),
  });
  // No down: nothing came up.
  expect((await receivedFor(runId)).map((r) => r.body.action)).toEqual(['up']);
}, 60_000);

test('two concurrent runs of one scenario get different testRunIds and testRunShortIds', async () => {
  const testId = await app.importTest({});
  const [a, b] = await Promise.all([startRun(testId), startRun(testId)]);
  const [ra, rb] = await Promise.all([runEnded(h, a!), runEnded(h, b!)]);
  expect([ra.status, rb.status]).toEqual(['passed', 'passed']);
  const upA = (await receivedFor(a!)).find((r) => r.body.action === 'up')!.body;
  const upB = (await receivedFor(b!)).find((r) => r.body.action === 'up')!.body;
  expect(upA.testRunId).not.toBe(upB.testRunId);
  expect(upA.testRunShortId).not.toBe(upB.testRunShortId);
  expect(upA.create.users[0].email).not.toBe(upB.create.users[0].email);
}, 120_000);

test('a failed down is recorded without changing a passed result', async () => {
  const runId = await startRun(
    await app.importTest({ scenario: { setup_id: app.setupId, recipe: 'bad-down' } }),
  );
  const run = await runEnded(h, runId);
  expect(run.status).toBe('passed');
  expect(run.error).toBeUndefined();
  expect(run.metadata.scenario.status).toBe('down_failed');
  expect(run.metadata.scenario_down_error).toContain('400 {"error":"cannot delete users"}');
}, 60_000);

describe('where the factory is', () => {
  const envKey = () => ({ orgId: h.org.orgId, envKey: keys.environments.envKey(app.repo, 0) });
  let saved: unknown;
  beforeAll(async () => {
    const { Item } = await ddb().send(new GetCommand({ TableName: table('environments'), Key: envKey() }));
    saved = Item?.factory;
  });
  afterAll(async () => {
    await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: envKey(),
        UpdateExpression: 'SET factory = :f',
        ExpressionAttributeValues: { ':f': saved },
      }),
    );
  });

  test('preview.yaml wins over the application setting', async () => {
    await updateApplication(h.org.orgId, app.applicationId, { factoryApp: 'web', factoryPath: '/nowhere' });
    const run = await runEnded(h, await startRun(await app.importTest({})));
    expect(run.status).toBe('passed');
  }, 60_000);

  test('without preview.yaml `factory`, the application setting is used', async () => {
    await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: envKey(),
        UpdateExpression: 'REMOVE factory',
      }),
    );
    await updateApplication(h.org.orgId, app.applicationId, {
      factoryApp: 'factory',
      factoryPath: '/_preview/factory',
    });
    const run = await runEnded(h, await startRun(await app.importTest({})));
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
  }, 60_000);

  test('with no factory configured, a scenario run fails saying so', async () => {
    await ddb().send(
      new UpdateCommand({
        TableName: table('applications'),
        Key: { applicationId: app.applicationId },
        UpdateExpression: 'REMOVE factoryApp, factoryPath',
      }),
    );
    const runId = await startRun(await app.importTest({}));
    const run = await runEnded(h, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('no Environment Factory is configured');
    expect(run.steps.map((s: any) => s.status)).toEqual(['skipped']);
    expect(await receivedFor(runId)).toEqual([]);
  }, 60_000);
});

test('an application without a factory signing secret fails the run saying how to make one', async () => {
  const ref = { applicationId: app.applicationId, app: FACTORY_SECRET_APP };
  const saved = (await secretStore().read(ref))!;
  await secretStore().write(ref, {});
  try {
    const runId = await startRun(await app.importTest({}));
    const run = await runEnded(h, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('has no factory signing secret: run `previewctl apps rotate-factory-secret');
    expect(await receivedFor(runId)).toEqual([]);
  } finally {
    await secretStore().write(ref, saved);
  }
}, 60_000);

test('a run a restart abandons sends down', async () => {
  const testId = await app.importTest({
    step_timeout_seconds: 20,
    steps: [{ interaction: 'wait-for', instruction: 'never', element: { html: '', selector: '#never' } }],
  });
  const runId = await startRun(testId);
  // Wait until up answered and the step is waiting.
  for (let i = 0; i < 100; i++) {
    const res = await call(h, 'GET', `/run/${runId}`, { headers: client(h.org) });
    if (res.body.metadata?.scenario?.status === 'up') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await recoverRuns({ secrets: secretStore() });
  const got = await receivedFor(runId);
  expect(got.map((r) => [r.body.action, r.verified])).toEqual([
    ['up', true],
    ['down', true],
  ]);
  const run = await runEnded(h, runId);
  expect(run.status).toBe('failed');
  expect(run.error).toContain('interrupted');
  expect(run.metadata.scenario.status).toBe('down');
}, 60_000);

describe('import', () => {
  test('rejects a scenario whose setup is not the organization’s, naming it', async () => {
    await expect(
      app.importTest({ scenario: { setup_id: 'no-such-setup', recipe: 'signed-in' } }),
    ).rejects.toThrow('[0].scenario: no setup no-such-setup in this organization');
  });
  test('rejects a recipe the setup does not have, naming it', async () => {
    await expect(app.importTest({ scenario: { setup_id: app.setupId, recipe: 'nope' } })).rejects.toThrow(
      `[0].scenario: setup ${app.setupId} version 1 has no recipe "nope"`,
    );
  });
});

describe('the factory is called, never followed', () => {
  const OTHER_SECRET = 'other-app-token-93be07';
  const otherHits: { method: string; url: string; signature: string | null }[] = [];
  let other: Server;
  let otherUrl: string;
  let setupId: string;
  beforeAll(async () => {
    // Another organization's app, say: a page with its token; every request recorded.
    other = createServer((req, res) => {
      const signature = req.headers['x-signature'];
      otherHits.push({
        method: req.method!,
        url: req.url!,
        signature: typeof signature === 'string' ? signature : null,
      });
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<h1>token ${OTHER_SECRET}</h1>`);
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    setupId = `setup-redirect-${Date.now().toString(36)}`;
    const recipe = (name: string, create: Record<string, unknown>) => ({
      name,
      description: name,
      create: { users: [{ email: 'qa+{{testRunShortId}}@example.com' }], ...create },
      validation: { status: 'validated', method: 'endpoint-up-down', phase: 'ok' },
    });
    const up = await call(h, 'POST', `/v1/setup/setups/${setupId}/scenario-recipe-versions`, {
      headers: bearer(h.org),
      body: {
        version: 1,
        source: { discoverPath: 'd.json', scenariosPath: 's.md' },
        validationMode: 'endpoint-lifecycle',
        recipes: [
          recipe('redirect-303', { redirects: [{ status: 303, to: `${otherUrl}/` }] }),
          recipe('redirect-307', { redirects: [{ status: 307, to: `${otherUrl}/_preview/factory` }] }),
          recipe('foreign-cookie', { cookieDomains: [{ domain: 'example.com' }] }),
        ],
      },
    });
    expect(up.status).toBe(201);
  }, 30_000);
  afterAll(async () => {
    await new Promise((r) => other.close(r));
  });

  test.each([
    [303, 'redirect-303', '/'],
    [307, 'redirect-307', '/_preview/factory'],
  ])(
    'up answering %i fails the run naming the status and Location; nothing reaches the target',
    async (status, recipe, path) => {
      const runId = await startRun(await app.importTest({ scenario: { setup_id: setupId, recipe } }));
      const run = await runEnded(h, runId);
      expect(run.status).toBe('failed');
      expect(run.error).toBe(
        `scenario "${recipe}" (setup ${setupId}) could not be provisioned: the Environment Factory answered up ` +
          `(${app.main.urls.factory}/_preview/factory) with a redirect, ${status} to ${otherUrl}${path}, which is ` +
          'not followed: the factory must answer at its own URL',
      );
      expect(run.steps.map((s: any) => s.status)).toEqual(['skipped']);
      expect(run.metadata.scenario.status).toBe('up_failed');
      const report = await (await fetch(reportUrls.get(runId)!)).text();
      expect(JSON.stringify(run)).not.toContain(OTHER_SECRET);
      expect(report).not.toContain(OTHER_SECRET);
      // Neither the 303's GET nor the 307's signed POST (body and x-signature) went there.
      expect(otherHits).toEqual([]);
    },
    60_000,
  );

  test("a cookie of up for a domain that is not the preview's: the auth is refused, no step runs", async () => {
    const runId = await startRun(
      await app.importTest({ scenario: { setup_id: setupId, recipe: 'foreign-cookie' } }),
    );
    const run = await runEnded(h, runId);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(
      `the scenario's auth could not be applied to the browser: the factory's cookie "session" is for ` +
        "example.com, not a host of this run's preview (127.0.0.1)",
    );
    expect(run.steps.map((s: any) => s.status)).toEqual(['skipped']);
    // Up answered, so down was still sent.
    expect((await receivedFor(runId)).map((r) => r.body.action)).toEqual(['up', 'down']);
  }, 60_000);
});
