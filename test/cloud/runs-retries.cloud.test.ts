import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { RunItem } from '../../functions/core/runs/store.js';
import { keys } from '../../functions/manifest/tables.js';
import { findExecutable } from '../../functions/ports/browser/local-chromium.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { type Cloud, startCloud } from './cloud-tier.js';

/*
 * Runs under retries and deadlines in the cloud simulation tier: the test-run step handlers in
 * PREVIEW_MODE=aws under Step Functions' retries and the Lambda's deadline, and the `runSweep` schedule's
 * handler.
 * - a retried Prepare (the same input twice) hands Execute the same attempt, and the run ends;
 * - a retried Execute (two invocations of the same input) sends the scenario's `up` once;
 * - an executor whose Lambda time runs out mid-steps stops them with the cause, keeping its media;
 * - MarkFailed after an executor that died after `up` sends the `down`, once across its retries;
 * - the sweep fails stale `running`/`pending` runs, and its `down` is sent once when MarkFailed races it.
 */

const onX64Linux = process.platform === 'linux' && process.arch === 'x64';
const orgId = 'org-cloud-retries';
const applicationId = 'app-cloud-retries';
const repo = 'acme/retries';
const setupId = 'setup-cloud-retries';

let cloud: Cloud;
let app: Server;
let factory: Server;
let appUrl: string;
let factoryUrl: string;
/** What the factory was sent: each request's action and testRunId. */
const factoryCalls: { action: string; testRunId: string }[] = [];

const listen = (server: Server) =>
  new Promise<string>((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );

beforeAll(async () => {
  app = createServer((req, res) => {
    const page = () => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<h1 id="home">Home</h1>');
    };
    // A slow page: each navigate to it takes 3 s.
    if (req.url?.startsWith('/slow')) setTimeout(page, 3_000);
    else page();
  });
  appUrl = await listen(app);
  factory = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const payload = JSON.parse(body || '{}') as { action: string; testRunId: string };
      factoryCalls.push({ action: payload.action, testRunId: payload.testRunId });
      // A slow `up`, so a retry arriving meanwhile would send its own.
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(payload.action === 'up' ? { refs: { user: 7 } } : {}));
        },
        payload.action === 'up' ? 500 : 0,
      );
    });
  });
  factoryUrl = await listen(factory);
  cloud = await startCloud({
    MEDIA_BUCKET: 'preview-media',
    PREVIEW_FFMPEG_PATH: findExecutable('ffmpeg') ?? '/usr/bin/ffmpeg',
  });
  const now = new Date().toISOString();
  const put = (TableName: string, Item: Record<string, unknown>) =>
    ddb().send(new PutCommand({ TableName, Item }));
  await put(table('applications'), {
    applicationId,
    orgId,
    name: repo,
    repoFullName: repo,
    repoKey: keys.applications.byRepo(orgId, repo),
    disabled: false,
    installationActive: true,
    createdAt: now,
    factoryApp: 'factory',
    factoryPath: '/_factory',
  });
  await put(table('environments'), {
    orgId,
    envKey: keys.environments.envKey(repo, 0),
    repoFullName: repo,
    prNumber: 0,
    status: 'ready',
    createdAt: now,
    updatedAt: now,
    urls: { web: appUrl, factory: factoryUrl },
    generation: 1,
  });
  // The organization, so the sweep lists its runs (the tenancy table lists organizations).
  await put(table('tenancy'), { pk: keys.tenancy.org(orgId), orgId, name: orgId, createdAt: now });
  const { ensureFactorySecret } = await import('../../functions/core/scenarios/factory.js');
  const { secretStore } = await import('../../functions/ports/registry/secret-store.js');
  await ensureFactorySecret(secretStore(), applicationId);
  const { createRecipeVersion } = await import('../../functions/core/recipes/versions.js');
  const doc = {
    version: 1,
    source: { discoverPath: 'd.json', scenariosPath: 's.md' },
    validationMode: 'endpoint-lifecycle',
    recipes: [
      {
        name: 'signed-in',
        description: 'a user',
        create: { users: [{ email: 'qa+{{testRunShortId}}@example.com' }] },
        validation: { status: 'validated', method: 'endpoint-up-down', phase: 'ok' },
      },
    ],
  };
  await createRecipeVersion({ orgId, setupId, doc, rawBody: JSON.stringify(doc) });
}, 120_000);
afterAll(async () => {
  await cloud?.stop();
  for (const s of [app, factory]) if (s) await new Promise((r) => s.close(r));
}, 60_000);

/** A pending run of a new test (started with no execution: each test drives the states itself). */
async function newRun(steps: unknown[], opts: { scenario?: boolean } = {}): Promise<string> {
  const { importTests } = await import('../../functions/core/test-definitions/definitions.js');
  const { startRun } = await import('../../functions/core/runs/lifecycle.js');
  const { tests } = await importTests(orgId, [
    {
      name: `Retried ${Date.now()}`,
      folder: { id: 'retries', name: 'Retries' },
      application_id: applicationId,
      application_version: { name: 'web', path: '/' },
      ...(opts.scenario ? { scenario: { setup_id: setupId, recipe: 'signed-in' } } : {}),
      steps,
    },
  ]);
  return startRun({ workflows: { start: async () => undefined } as never }, orgId, tests[0]!.id);
}

const load = async (runId: string) => {
  const { loadRun } = await import('../../functions/core/runs/store.js');
  return (await loadRun(runId))!;
};
const callsOf = (runId: string, action: string) =>
  factoryCalls.filter((c) => c.testRunId === runId && c.action === action).length;

type Prepared = { ready: true; attempt: string; target: unknown } | { ready: false };
const home = { interaction: 'assert-visible', instruction: 'home', element: { html: '', selector: '#home' } };
const slow = { interaction: 'navigate', instruction: 'Open the slow page', url: '/slow' };

test('a retried Prepare whose first write landed carries on with the same attempt, and the run ends', async () => {
  const runId = await newRun([home]);
  const input = { runId, execution: `run-${runId}-exec` };
  const first = await cloud.invoke<Prepared>('functions/steps/run-prepare.ts', input);
  const retried = await cloud.invoke<Prepared>('functions/steps/run-prepare.ts', input);
  expect(first.ready).toBe(true);
  expect(retried).toEqual(first);
  // Another execution's Prepare of the same run is not handed the attempt.
  expect(
    await cloud.invoke<Prepared>('functions/steps/run-prepare.ts', { runId, execution: 'another-execution' }),
  ).toEqual({ ready: false });
  if (!onX64Linux) return;
  await cloud.invoke('functions/steps/run-execute.ts', { runId, prepared: retried }, 600_000);
  const run = await load(runId);
  expect([run.status, run.error]).toEqual(['passed', undefined]);
}, 240_000);

(onX64Linux ? describe : describe.skip)('the executor Lambda', () => {
  test('a retried Execute sends the scenario up once and the run ends once', async () => {
    const runId = await newRun([home], { scenario: true });
    const prepared = await cloud.invoke<Prepared>('functions/steps/run-prepare.ts', {
      runId,
      execution: `run-${runId}-exec`,
    });
    expect(prepared.ready).toBe(true);
    // Step Functions retried the task while the first invocation was still running.
    const execute = () =>
      cloud.invoke<{ status: string }>('functions/steps/run-execute.ts', { runId, prepared }, 600_000);
    const results = await Promise.all([execute(), new Promise((r) => setTimeout(r, 200)).then(execute)]);
    expect(results).toEqual([{ status: 'passed' }, { status: 'passed' }]);
    expect([callsOf(runId, 'up'), callsOf(runId, 'down')]).toEqual([1, 1]);
    const run = await load(runId);
    expect([run.status, (run.scenarioState as { status: string }).status]).toEqual(['passed', 'down']);
  }, 240_000);

  test('an executor whose Lambda time runs out mid-steps stops them with that cause, keeping its media', async () => {
    const { executorReserveMs } = await import('../../functions/core/runs/execution/deadline.js');
    const runId = await newRun([slow, slow, slow, slow, slow, slow, slow, slow]);
    const prepared = await cloud.invoke<Prepared>('functions/steps/run-prepare.ts', { runId });
    // The Lambda has 20 s for its steps beyond the reserve; the steps would take 24 s and more.
    await cloud.invoke(
      'functions/steps/run-execute.ts',
      { runId, prepared },
      executorReserveMs({ scenario: false }) + 20_000,
    );
    const run = await load(runId);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(
      /^run stopped (after|during) step [1-7]( \(navigate\))?: the function's time is nearly up \(the executor had 3\d\d(\.\d)? s left when the run began and keeps 375 s for the video, its upload and the scenario's down\)$/,
    );
    const ran = run.steps.filter((s) => s.status === 'passed');
    expect(ran.length).toBeGreaterThan(0);
    expect(run.steps.at(-1)!.status).toBe('skipped');
    for (const s of ran) expect(s.imageKey).toEqual(expect.stringContaining(`runs/${orgId}/${runId}/step-`));
    expect(run.videoKey).toBe(`runs/${orgId}/${runId}/video.mp4`);
  }, 240_000);
});

/** A run as a dead executor left it: `running` under `attempt`, its scenario `up` at the factory. */
async function abandonedRun(opts: { startedMinutesAgo: number; status?: 'running' | 'pending' }) {
  const runId = await newRun([home], { scenario: true });
  const run = await load(runId);
  const startedAt = new Date(Date.now() - opts.startedMinutesAgo * 60_000).toISOString();
  const status = opts.status ?? 'running';
  const item: RunItem & Record<string, unknown> = {
    ...run,
    status,
    createdAt: startedAt,
    ...(status === 'running' ? { startedAt, attempt: `attempt-${runId}` } : {}),
    ...keys.runs.indexKeys({
      orgId,
      runId,
      testId: run.testId,
      folderId: run.folder.id,
      status,
      createdAt: startedAt,
    }),
    scenarioState: {
      setupId,
      name: 'signed-in',
      version: 1,
      testRunId: runId,
      testRunShortId: runId.slice(0, 8),
      factoryUrl: `${factoryUrl}/_factory`,
      status: 'up',
      upMs: 10,
      refs: JSON.stringify({ user: 7 }),
    },
  };
  await ddb().send(new PutCommand({ TableName: table('runs'), Item: item }));
  return runId;
}

test('MarkFailed after an executor that died after up sends the down, once across its retries', async () => {
  const runId = await abandonedRun({ startedMinutesAgo: 15 });
  const input = {
    runId,
    prepared: { attempt: `attempt-${runId}` },
    failure: { Error: 'States.Timeout', Cause: 'Task timed out after 900.00 seconds' },
  };
  // Step Functions retried MarkFailed after a Lambda service error while the first was still sending.
  await Promise.all([
    cloud.invoke('functions/steps/run-mark-failed.ts', input),
    cloud.invoke('functions/steps/run-mark-failed.ts', input),
  ]);
  await cloud.invoke('functions/steps/run-mark-failed.ts', input);
  const run = await load(runId);
  expect(run.status).toBe('failed');
  expect(callsOf(runId, 'down')).toBe(1);
  expect((run.scenarioState as { status: string }).status).toBe('down');
}, 60_000);

test("a retried Execute that finds a dead executor's lease passed ends the run once, sending no up and one down", async () => {
  const { UpdateCommand } = await import('@aws-sdk/lib-dynamodb');
  const { EXECUTOR_DIED } = await import('../../functions/core/runs/execution/claims.js');
  const runId = await abandonedRun({ startedMinutesAgo: 16 });
  // The first invocation claimed the attempt and died after `up` (its lease, its Lambda's deadline, passed).
  await ddb().send(
    new UpdateCommand({
      TableName: table('runs'),
      Key: { runId },
      UpdateExpression: 'SET executor = :dead, executorLeaseUntil = :past',
      ExpressionAttributeValues: { ':dead': 'invocation-that-died', ':past': Date.now() - 60_000 },
    }),
  );
  const prepared = {
    attempt: `attempt-${runId}`,
    target: { url: appUrl, appUrl, applicationId, apps: ['web'] },
  };
  const results = await Promise.all([
    cloud.invoke('functions/steps/run-execute.ts', { runId, prepared }),
    cloud.invoke('functions/steps/run-execute.ts', { runId, prepared }),
  ]);
  expect(results).toEqual([{ status: 'failed' }, { status: 'failed' }]);
  const run = await load(runId);
  expect([run.status, run.error]).toEqual(['failed', EXECUTOR_DIED]);
  expect([callsOf(runId, 'up'), callsOf(runId, 'down')]).toEqual([0, 1]);
}, 60_000);

describe('the run sweep', () => {
  test('fails runs left running or pending past their limit, with the reason, and leaves fresh ones', async () => {
    const stale = await abandonedRun({ startedMinutesAgo: 60 });
    const stalePending = await abandonedRun({ startedMinutesAgo: 60, status: 'pending' });
    const fresh = await abandonedRun({ startedMinutesAgo: 2 });
    const result = await cloud.invoke<{ failed: number }>('functions/events/run-sweep.ts', {}, 300_000);
    expect(result.failed).toBeGreaterThanOrEqual(2);
    const [s, p, f] = await Promise.all([load(stale), load(stalePending), load(fresh)]);
    expect([s.status, s.error]).toEqual([
      'failed',
      expect.stringMatching(
        /^abandoned: the run was still running 60 min after it started, past its time limit \(600 s\)/,
      ),
    ]);
    expect([p.status, p.error]).toEqual([
      'failed',
      expect.stringMatching(
        /^abandoned: the run was still pending 60 min after it was created; start it again$/,
      ),
    ]);
    expect(f.status).toBe('running');
    expect([callsOf(stale, 'down'), callsOf(fresh, 'down')]).toEqual([1, 0]);
    expect((s.scenarioState as { status: string }).status).toBe('down');
  }, 300_000);

  test('sends the owed down once when MarkFailed races it', async () => {
    for (let i = 0; i < 3; i++) {
      const runId = await abandonedRun({ startedMinutesAgo: 60 });
      await Promise.all([
        cloud.invoke('functions/events/run-sweep.ts', {}, 300_000),
        cloud.invoke('functions/steps/run-mark-failed.ts', {
          runId,
          prepared: { attempt: `attempt-${runId}` },
          failure: { Error: 'States.Timeout', Cause: 'timed out' },
        }),
      ]);
      expect([(await load(runId)).status, callsOf(runId, 'down')]).toEqual(['failed', 1]);
    }
  }, 300_000);
});
