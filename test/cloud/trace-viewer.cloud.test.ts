import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import type { RunItem } from '../../functions/core/run-store.js';
import { pages } from '../../functions/manifest/routes.js';
import { keys } from '../../functions/manifest/tables.js';
import { ddb, table } from '../../functions/shared/dynamo.js';
import { REGION } from './fakes/aws.js';
import { type Cloud, startCloud } from './harness.js';

/*
 * Issue 28, the AWS half of the trace viewer, in the cloud simulation tier (PREVIEW_MODE=aws, the S3
 * presigner and Secrets Manager at the loopback fake): the report page of a run with a trace links
 * `https://<api host>/<stage>/trace-viewer/index.html?trace=<presigned trace URL>`, a path the API has
 * (the `traceViewer` page, `GET /trace-viewer/{proxy+}`), and that page's real handler answers it with the
 * viewer. The CORS rule that lets the viewer fetch the trace is the stack's (test/infra/trace-viewer.test.ts).
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
  const { reportLink } = await import('../../functions/core/run-report.js');
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
