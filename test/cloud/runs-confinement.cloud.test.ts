import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { PreparedRun } from '../../functions/core/runs/lifecycle.js';
import { keys } from '../../functions/manifest/tables.js';
import { findExecutable } from '../../functions/ports/browser/local-chromium.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { type Cloud, startCloud } from './cloud-tier.js';

/*
 * Run confinement in the cloud simulation tier: the test-run executor Lambda's own configuration
 * (PREVIEW_MODE=aws, so the registry's LambdaChromium, @sparticuz/chromium with its Lambda flags, media to
 * S3) runs a run through the real `run-prepare` and `run-execute` step handlers. Its browser reaches the
 * preview's app and nothing else: not the Lambda Runtime API (127.0.0.1:9001, served here by a stand-in
 * answering a secret), not the instance metadata address, not another port on loopback, not file:.
 */

const RUNTIME_SECRET = 'runtime-api-secret-c4a9e1';
const OTHER_SECRET = 'other-port-secret-82d0f3';
const onX64Linux = process.platform === 'linux' && process.arch === 'x64';

let cloud: Cloud;
let app: Server;
let other: Server;
let runtimeApi: Server | undefined;
let appUrl: string;
let otherUrl: string;
const hits: string[] = [];
const orgId = 'org-cloud-confine';
const applicationId = 'app-cloud-confine';
const repo = 'acme/confine';

const listen = (server: Server, port = 0) =>
  new Promise<string | undefined>((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    );
  });

beforeAll(async () => {
  if (!onX64Linux) return;
  runtimeApi = createServer((req, res) => {
    hits.push(`runtime ${req.url}`);
    res.end(RUNTIME_SECRET);
  });
  if (!(await listen(runtimeApi, 9001))) runtimeApi = undefined;
  other = createServer((req, res) => {
    hits.push(`other ${req.url}`);
    res.writeHead(200, { 'content-type': 'text/html', 'access-control-allow-origin': '*' });
    res.end(`<h1>${OTHER_SECRET}</h1>`);
  });
  otherUrl = (await listen(other))!;
  app = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x').searchParams.get('u') ?? '';
    if (req.url?.startsWith('/go')) {
      res.writeHead(302, { location: u });
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    if (req.url?.startsWith('/fetch'))
      return res.end(
        `<h1 id="home">Home</h1><script>fetch(${JSON.stringify(u)}).then((r) => r.text())</script>`,
      );
    res.end('<h1 id="home">Home</h1>');
  });
  appUrl = (await listen(app))!;
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
  });
  // The main-branch environment, ready, its one app served by this test.
  await put(table('environments'), {
    orgId,
    envKey: keys.environments.envKey(repo, 0),
    repoFullName: repo,
    prNumber: 0,
    status: 'ready',
    createdAt: now,
    updatedAt: now,
    urls: { web: appUrl },
    generation: 1,
  });
}, 120_000);
afterAll(async () => {
  await cloud?.stop();
  for (const s of [app, other, runtimeApi]) if (s) await new Promise((r) => s.close(r));
}, 60_000);

/** A run of one test through the executor Lambda's step handlers; the run as stored at its end. */
async function runThroughLambda(steps: unknown[]) {
  const { importTests } = await import('../../functions/core/test-definitions/definitions.js');
  const { startRun } = await import('../../functions/core/runs/lifecycle.js');
  const { loadRun } = await import('../../functions/core/runs/store.js');
  const { tests } = await importTests(orgId, [
    {
      name: 'Confined',
      folder: { id: 'confined', name: 'Confined' },
      application_id: applicationId,
      application_version: { name: 'web', path: '/' },
      steps,
    },
  ]);
  // The execution is driven here, state by state, instead of by the state machine.
  const runId = await startRun({ workflows: { start: async () => undefined } as never }, orgId, tests[0]!.id);
  const prepared = await cloud.invoke<PreparedRun>('functions/steps/run-prepare.ts', { runId });
  if (!prepared.ready) throw new Error(`not prepared: ${JSON.stringify(await loadRun(runId))}`);
  expect(prepared.target.origins).toEqual([appUrl]);
  await cloud.invoke('functions/steps/run-execute.ts', { runId, prepared });
  return (await loadRun(runId))!;
}

const home = { interaction: 'assert-visible', instruction: 'home', element: { html: '', selector: '#home' } };
const navigate = (url: string) => ({ interaction: 'navigate', instruction: `Open ${url}`, url });
const refused = (origin: string) => `navigation to ${origin} is not allowed for this run`;

(onX64Linux ? describe : describe.skip)("the executor Lambda's browser reaches only the preview", () => {
  // Built when the test runs (the servers' ports are known only then).
  const RUNTIME = 'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next';
  const cases: [string, () => unknown, () => string][] = [
    ['the Lambda Runtime API', () => navigate(RUNTIME), () => refused('http://127.0.0.1:9001')],
    [
      'the instance metadata address',
      () => navigate('http://169.254.169.254/latest/meta-data/'),
      () => refused('http://169.254.169.254'),
    ],
    ['another port on loopback', () => navigate(`${otherUrl}/`), () => refused(otherUrl)],
    ['file:', () => navigate('file:///proc/self/environ'), () => refused('file://')],
    [
      'a 302 from the preview to the Runtime API',
      () => navigate(`/go?u=${encodeURIComponent(RUNTIME)}`),
      () => refused('http://127.0.0.1:9001'),
    ],
  ];
  test.each(cases)(
    '%s is refused, its step failed saying so, nothing of it recorded',
    async (_name, step, message) => {
      // A second step: a page's own request may come after the page loaded, during what follows.
      const run = await runThroughLambda([step(), home]);
      const failed = run.steps.find((x) => x.status === 'failed');
      expect([run.status, failed?.output]).toEqual(['failed', message()]);
      expect(run.error).toMatch(/^step [12] \((navigate|assert-visible)\) failed: /);
      expect(run.error!.replace(/^step [12] \([a-z-]+\) failed: /, '')).toBe(message());
      const text = JSON.stringify(run);
      expect(text).not.toContain(RUNTIME_SECRET);
      expect(text).not.toContain(OTHER_SECRET);
      expect(hits).toEqual([]);
    },
    240_000,
  );

  test("the page's fetch of the Runtime API is refused and recorded on its step and the run; the steps pass", async () => {
    const run = await runThroughLambda([navigate(`/fetch?u=${encodeURIComponent(RUNTIME)}`), home]);
    expect([run.status, run.error, run.steps.map((s) => s.status)]).toEqual([
      'passed',
      undefined,
      ['passed', 'passed'],
    ]);
    // A page's own request may come after the page loaded, during what follows: on one of its steps.
    expect(run.steps.flatMap((s) => (s.network ?? []).filter((n) => n.status === 'refused'))).toEqual([
      { status: 'refused', text: "the page's fetch to http://127.0.0.1:9001 is not allowed for this run" },
    ]);
    expect(run.refusedOrigins).toEqual(['http://127.0.0.1:9001']);
    const text = JSON.stringify(run);
    expect(text).not.toContain(RUNTIME_SECRET);
    expect(hits).toEqual([]);
  }, 240_000);

  test("a healed run's record in AWS: the step's `healed`, `healedSteps`, and the sparse listHealed index lists it", async () => {
    // Recorded when the heading had another id: `#welcome` matches nothing now.
    const healedStep = {
      interaction: 'assert-visible',
      instruction: 'See the Home heading',
      element: { html: '<h1 id="welcome">Home</h1>', selector: '#welcome' },
    };
    const run = await runThroughLambda([navigate('/'), healedStep]);
    expect([run.status, run.error, run.healedSteps]).toEqual(['passed', undefined, 1]);
    expect(run.steps[1]!.healed).toEqual({
      from: '#welcome',
      to: 'role=heading[name="Home"]',
      score: expect.any(Number),
      html: '<h1 id="home">Home</h1>',
    });
    expect(run.steps[1]!.output).toMatch(/^healed: #welcome → role=heading\[name="Home"\] \(0\.\d\d\); /);
    const plain = await runThroughLambda([navigate('/'), home]);
    expect([plain.status, plain.healedSteps]).toEqual(['passed', undefined]);
    // GET /run?healed=true's page: the index holds the healed run, not the plain one.
    const { listRunPage } = await import('../../functions/core/runs/listing.js');
    const page = await listRunPage(
      orgId,
      { healed: true },
      { limit: 100, offset: 0 },
      { media: false, steps: false },
    );
    const ids = page.runs.map((r) => r.id);
    expect(ids).toContain(run.runId);
    expect(ids).not.toContain(plain.runId);
    expect(page.runs.find((r) => r.id === run.runId)!.healed_steps).toBe(1);
    // Another organization's healed page is empty.
    const theirs = await listRunPage(
      'org-other',
      { healed: true },
      { limit: 100, offset: 0 },
      { media: false, steps: false },
    );
    expect(theirs.runs).toEqual([]);
  }, 240_000);

  test("the preview's own app loads", async () => {
    const run = await runThroughLambda([navigate('/'), home]);
    expect([run.status, run.error, run.steps.map((s) => s.status)]).toEqual([
      'passed',
      undefined,
      ['passed', 'passed'],
    ]);
    // Media went to S3 (the fake): the step's screenshot and the video.
    expect(run.steps[0]!.imageKey).toEqual(expect.stringContaining(`runs/${orgId}/`));
  }, 240_000);
});
