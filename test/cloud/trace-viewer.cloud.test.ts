import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import type { RunItem } from '../../functions/core/runs/store.js';
import { pages } from '../../functions/manifest/routes.js';
import { keys } from '../../functions/manifest/tables.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { type Cloud, startCloud } from './cloud-tier.js';
import { REGION } from './fakes/aws.js';

/*
 * The AWS half of the trace viewer, in the cloud simulation tier (PREVIEW_MODE=aws, the S3
 * presigner and Secrets Manager at the loopback fake): the report page of a run with a trace links
 * `https://<api host>/<stage>/trace-viewer/index.html?trace=<presigned trace URL>`, a path the API has
 * (the `traceViewer` page, `GET /trace-viewer/{proxy+}`), and that page's real handler answers it with the
 * viewer. In chromium, that handler behind an API-Gateway-like front (under a stage, no binary media
 * types) opens a trace from another origin answering with the bucket's CORS rule (the stack's, held by
 * test/infra/trace-viewer.test.ts), icons included, and cannot without it.
 */

const LINK_SECRET_ARN = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview-run-links`;
const HOST = 'abc123def4.execute-api.eu-west-1.amazonaws.com';
const STAGE = 'api';
const orgId = 'org-cloud-trace';
const runId = 'runcloudtrace1';

let cloud: Cloud;
beforeAll(async () => {
  cloud = await startCloud({ MEDIA_BUCKET: 'preview-media', RUN_LINK_SECRET_ARN: LINK_SECRET_ARN });
  cloud.aws.secrets.set(LINK_SECRET_ARN, 'k'.repeat(64));
  const createdAt = new Date().toISOString();
  const run: RunItem = {
    runId,
    orgId,
    testId: 'test-cloud-trace',
    name: 'Traced',
    status: 'passed',
    createdAt,
    endedAt: createdAt,
    folder: { id: 'f', name: 'F' },
    source: 'api',
    variables: {},
    steps: [],
    traceKey: `runs/${orgId}/${runId}/trace.zip`,
    ...keys.runs.indexKeys({
      orgId,
      runId,
      testId: 'test-cloud-trace',
      folderId: 'f',
      status: 'passed',
      createdAt,
    }),
  };
  await ddb().send(new PutCommand({ TableName: table('runs'), Item: run }));
}, 60_000);
afterAll(async () => {
  await cloud?.stop();
});

/** An API Gateway proxy event for a GET on the API's own host, under its stage. */
const apiEvent = (
  path: string,
  pathParameters: Record<string, string>,
  query: Record<string, string> = {},
) => ({
  httpMethod: 'GET',
  path,
  resource: path,
  pathParameters,
  queryStringParameters: query,
  headers: { Host: HOST },
  requestContext: { stage: STAGE, domainName: HOST, requestId: `req-${Date.now()}` },
  body: null,
  isBase64Encoded: false,
});

test("the report's trace link is a path of the API whose page serves the viewer", async () => {
  // Prepare: the run's signed report link, as GET /run answers it.
  const { reportLink } = await import('../../functions/core/runs/report.js');
  const { mediaReader } = await import('../../functions/ports/registry/media.js');
  const link = new URL(await reportLink(mediaReader(), `https://${HOST}/${STAGE}`, runId));
  const report = await cloud.invoke<{ statusCode: number; body: string }>(
    'functions/api/runs/report.ts',
    apiEvent(`/report/${runId}`, { run_id: runId }, Object.fromEntries(link.searchParams)),
  );
  expect(report.statusCode).toBe(200);
  const href = /<a id="trace" href="([^"]+)"/.exec(report.body)?.[1]?.replace(/&amp;/g, '&');
  expect(href).toBeDefined();
  // Act: the link, as API Gateway would route it: the stage, then a path of the API.
  const viewerUrl = new URL(href!);
  expect(viewerUrl.host).toBe(HOST);
  expect(viewerUrl.pathname.startsWith(`/${STAGE}/`)).toBe(true);
  const path = viewerUrl.pathname.slice(STAGE.length + 1);
  const route = new RegExp(`^${pages.traceViewer.path.replace('{proxy+}', '(.+)')}$`).exec(path);
  expect(route).not.toBeNull();
  const trace = new URL(viewerUrl.searchParams.get('trace')!);
  const viewer = await cloud.invoke<{ statusCode: number; headers: Record<string, string>; body: string }>(
    pages.traceViewer.entry,
    apiEvent(path, { proxy: route![1]! }, Object.fromEntries(viewerUrl.searchParams)),
  );
  // Assess: the viewer's page, and a presigned GET of the run's trace for it to open.
  expect(route![1]).toBe('index.html');
  expect(viewer.statusCode).toBe(200);
  expect(viewer.headers['content-type']).toBe('text/html; charset=utf-8');
  expect(viewer.body).toContain('<title>Playwright Trace Viewer</title>');
  expect(trace.pathname).toBe(`/preview-media/runs/${orgId}/${runId}/trace.zip`);
  expect(trace.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
  expect(trace.searchParams.get('X-Amz-Expires')).toBe('3600');
  // The viewer's service worker, in scope under the stage's path.
  const sw = await cloud.invoke<{ statusCode: number; headers: Record<string, string> }>(
    pages.traceViewer.entry,
    apiEvent('/trace-viewer/sw.bundle.js', { proxy: 'sw.bundle.js' }),
  );
  expect(sw.statusCode).toBe(200);
  expect(sw.headers['service-worker-allowed']).toBe(`/${STAGE}/trace-viewer/`);
});

test.each([
  ['a path out of the folder', '../../../package.json'],
  ['an encoded one', '..%2F..%2Fpackage.json'],
  ['a file it does not have', 'nope.html'],
])('%s is a 404 JSON error', async (_what, proxy) => {
  const res = await cloud.invoke<{ statusCode: number; body: string }>(
    pages.traceViewer.entry,
    apiEvent(`/trace-viewer/${proxy}`, { proxy }),
  );
  expect(res.statusCode).toBe(404);
  expect(JSON.parse(res.body)).toEqual({ error: 'not found' });
});

/** Listen on loopback; the server's origin. */
const listen = (server: Server) =>
  new Promise<string>((ok) =>
    server.listen(0, '127.0.0.1', () => ok(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );

test('in chromium, the viewer served by the page handler opens a trace from another origin that answers with the bucket CORS rule', async () => {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  const dir = mkdtempSync(join(tmpdir(), 'trace-viewer-cloud-'));
  const servers: Server[] = [];
  try {
    // Prepare: a trace of a click, as a run records one.
    const context = await browser.newContext();
    await context.tracing.start({ screenshots: true, snapshots: true });
    const traced = await context.newPage();
    await traced.setContent('<button id="go">Go there</button>');
    await traced.click('#go');
    await context.tracing.stop({ path: join(dir, 'trace.zip') });
    await context.close();
    // The API, as API Gateway fronts the page: `/<stage>/trace-viewer/{proxy+}` to the real handler, its
    // answer sent as the handler gives it (no binary media types: a base64 body stays base64 text).
    const api = createServer(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://api');
      const prefix = `/${STAGE}/trace-viewer/`;
      if (!url.pathname.startsWith(prefix)) return res.writeHead(404).end();
      const proxy = url.pathname.slice(prefix.length);
      const answer = await cloud.invoke<{
        statusCode: number;
        headers: Record<string, string>;
        body: string;
      }>(pages.traceViewer.entry, {
        ...apiEvent(url.pathname.slice(STAGE.length + 1), { proxy }),
        httpMethod: req.method ?? 'GET',
      });
      res.writeHead(answer.statusCode, answer.headers).end(answer.body);
    });
    const apiOrigin = await listen(api);
    servers.push(api);
    // The media bucket, on another origin, answering CORS as S3 does with the stack's rule: the API's
    // origin only, GET and HEAD, `Range` allowed, the length and range headers exposed.
    const zip = join(dir, 'trace.zip');
    const corsFor = (req: IncomingMessage, cors: boolean): Record<string, string> =>
      cors && req.headers.origin === apiOrigin
        ? {
            'access-control-allow-origin': apiOrigin,
            'access-control-allow-methods': 'GET, HEAD',
            'access-control-allow-headers': 'range',
            'access-control-expose-headers': 'Content-Length, Content-Range, Accept-Ranges, ETag',
            vary: 'Origin',
          }
        : {};
    const media = (cors: boolean) =>
      createServer((req: IncomingMessage, res: ServerResponse) => {
        if (req.method === 'OPTIONS') return res.writeHead(cors ? 200 : 403, corsFor(req, cors)).end();
        res
          .writeHead(200, {
            'content-type': 'application/zip',
            'content-length': String(statSync(zip).size),
            ...corsFor(req, cors),
          })
          .end(req.method === 'HEAD' ? undefined : readFileSync(zip));
      });
    const withCors = media(true);
    const withoutCors = media(false);
    servers.push(withCors, withoutCors);
    const [mediaOrigin, bareOrigin] = [await listen(withCors), await listen(withoutCors)];
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const viewer = (mediaAt: string) =>
      `${apiOrigin}/${STAGE}/trace-viewer/index.html?trace=${encodeURIComponent(`${mediaAt}/runs/o/r/trace.zip?X-Amz-Signature=x`)}`;
    // Act: the viewer opens the trace through its service worker, cross-origin.
    await page.goto(viewer(mediaOrigin), { waitUntil: 'load' });
    await page.getByText(/Click/).first().waitFor({ timeout: 30_000 });
    // Assess: the click is listed; the icon font (inlined into its stylesheet) is loaded.
    expect(await page.getByText(/Click/).count()).toBeGreaterThan(0);
    // (Expressions, not functions: this file is typed for Node, without the DOM's types.)
    await page.waitForFunction("document.fonts.check('16px codicon')", undefined, { timeout: 10_000 });
    const fontLoaded = await page.evaluate(
      "(async () => { await document.fonts.ready; return [...document.fonts].some((f) => f.family.replace(/\"/g, '') === 'codicon' && f.status === 'loaded'); })()",
    );
    expect(fontLoaded).toBe(true);
    // And without the CORS answer the same trace cannot be read: the rule is what opens it.
    const bare = await browser.newPage();
    await bare.goto(viewer(bareOrigin), { waitUntil: 'load' });
    await bare
      .getByText(/Could not load trace|Failed to fetch|error/i)
      .first()
      .waitFor({ timeout: 30_000 });
    expect(await bare.getByText(/Click/).count()).toBe(0);
  } finally {
    await browser.close();
    for (const server of servers) server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
