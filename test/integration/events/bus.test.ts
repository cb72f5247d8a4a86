import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  createApplication,
  getApplication,
  updateApplication,
} from '../../../functions/core/applications/applications.js';
import { STRANDED_DEPLOY_MS, STRANDED_TEARDOWN_MS } from '../../../functions/core/environments/expiry.js';
import { DETAIL_TYPES, REDEPLOY_EVENT_SOURCE } from '../../../functions/manifest/events.js';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { queueLocalEvents } from '../../../lib/local/bus.js';
import { bearer, call } from '../../support/api.js';
import { type Status as AppStatus, hit, pollUntil, SERVER_JS, settled } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl } from '../../support/process.js';
import { deploymentStates, lastComment } from '../../support/webhooks.js';

/** An environment's status as GET answers it (the fields these tests read). */
type Status = AppStatus & { updatedAt: string; fork?: true };
/*
 * The service's event bus, locally: the documented custom event `Preview Redeploy Requested`
 * (whole environment, one app) put with `previewctl events put` or dropped in the inbox; a malformed
 * event reaching the dead-letter path without harming the server; the expiry sweep.
 */

const h = localServerForFile();
let auth: Record<string, string>;
let sha: string;
let applicationId: string;

const TWO_APPS = `apps:
  web:
    port: 3000
    command: node server.js web
    health: /healthz
  api:
    port: 4000
    command: node server.js api
`;
const path = (pr: number, repo = 'acme/bus') => `/v1/preview/environments/${repo}/${pr}`;
const status = async (pr: number, done: (s: Status) => boolean = settled, repo?: string): Promise<Status> =>
  (await pollUntil(h, h.org, path(pr, repo), (s) => done(s as Status), 30_000)) as Status;
async function settle() {
  await h.service.inbox.drain();
  await h.service.bus.idle();
  await h.service.workflows.idle();
  await h.service.bus.idle();
}
async function deploy(pr: number, repo = 'acme/bus', headSha = sha) {
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: pr, headSha, headRef: 'feature' },
    headers: auth,
  });
  expect(res.status).toBe(202);
  await settle();
  return status(pr, settled, repo);
}
const redeployEvent = (detail: Record<string, unknown>) => ({
  source: REDEPLOY_EVENT_SOURCE,
  'detail-type': DETAIL_TYPES.redeployRequested,
  detail,
});
const dlq = () =>
  existsSync(join(h.dataDir, 'event-dlq.jsonl'))
    ? readFileSync(join(h.dataDir, 'event-dlq.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
    : [];

beforeAll(async () => {
  sha = makeRepo(h.gitRoot, 'acme/bus', { 'preview.yaml': TWO_APPS, 'server.js': SERVER_JS, VERSION: 'v1' });
  auth = bearer(h.org);
  applicationId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/bus' })).applicationId;
}, 60_000);

describe('Preview Redeploy Requested', () => {
  let first: Status;

  test('`previewctl events put --file EVENT.json`: the whole environment is redeployed', async () => {
    first = await deploy(1);
    expect(first.status).toBe('ready');
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    writeFileSync(
      join(h.dataDir, 'EVENT.json'),
      JSON.stringify(redeployEvent({ orgId: h.org.orgId, repoFullName: 'acme/bus', prNumber: 1 })),
    );
    const out = await previewctl(h.dataDir, 'events', 'put', '--file', 'EVENT.json');
    expect(out).toEqual({
      code: 0,
      out: {
        put: 1,
        queued: expect.stringContaining(join(h.dataDir, 'events-inbox')),
        delivery: 'the running local server delivers them now',
      },
    });
    await settle();
    const after = await status(1, (s) => settled(s) && s.updatedAt !== first.updatedAt);
    expect(after.status).toBe('ready');
    expect((await hit(after.urls.web!)).pid).not.toBe(before.web.pid);
    expect((await hit(after.urls.api!)).pid).not.toBe(before.api.pid);
    expect(h.service.bus.deliveries.at(-1)).toMatchObject({
      rule: 'previewRedeployRequested',
      outcome: 'delivered',
      result: { outcome: 'redeploy requested' },
    });
    first = after;
  }, 60_000);

  test('one app: only that app restarts', async () => {
    const before = { web: await hit(first.urls.web!), api: await hit(first.urls.api!) };
    queueLocalEvents(h.dataDir, [
      {
        source: REDEPLOY_EVENT_SOURCE,
        detailType: DETAIL_TYPES.redeployRequested,
        detail: { orgId: h.org.orgId, repoFullName: 'acme/bus', prNumber: 1, app: 'web', mode: 'restart' },
      },
    ]);
    await settle();
    const after = await status(1, (s) => settled(s) && s.updatedAt !== first.updatedAt);
    expect(after.status).toBe('ready');
    expect((await hit(after.urls.web!)).pid).not.toBe(before.web.pid);
    expect(await hit(after.urls.api!)).toEqual(before.api);
    expect(h.service.bus.deliveries.at(-1)?.result).toEqual({
      outcome: 'redeploy of web (restart) requested',
    });
  });

  test('an environment that does not exist: the use case’s 404 fails the delivery, to the dead-letter file', async () => {
    const { eventIds } = await h.service.bus.put([
      {
        source: REDEPLOY_EVENT_SOURCE,
        detailType: DETAIL_TYPES.redeployRequested,
        detail: { orgId: h.org.orgId, repoFullName: 'acme/bus', prNumber: 99 },
      },
    ]);
    await settle();
    expect(h.service.bus.deliveries.find((d) => d.eventId === eventIds[0])).toMatchObject({
      outcome: 'failed',
      attempts: 3,
      error: 'NotFoundError: environment not found',
    });
    expect(dlq().at(-1)).toMatchObject({
      requestPayload: { id: eventIds[0], detail: { prNumber: 99 } },
      responsePayload: { errorType: 'NotFoundError', errorMessage: 'environment not found' },
    });
  });
});

describe('a malformed event', () => {
  test('is logged with its reason and lands in the dead-letter file; the server carries on', async () => {
    const { eventIds } = await h.service.bus.put([
      {
        source: REDEPLOY_EVENT_SOURCE,
        detailType: DETAIL_TYPES.redeployRequested,
        detail: { orgId: h.org.orgId, repoFullName: 'acme/bus', prNumber: 'one' },
      },
    ]);
    await settle();
    const reason = 'invalid detail: prNumber: Invalid input: expected number, received string';
    expect(h.service.bus.deliveries.find((d) => d.eventId === eventIds[0])).toMatchObject({
      outcome: 'failed',
      attempts: 1,
      error: `MalformedEvent: event ${eventIds[0]} (Preview Redeploy Requested): ${reason}`,
    });
    const record = dlq().find((r) => r.requestContext.requestId === eventIds[0]);
    expect(record).toMatchObject({
      requestContext: { condition: 'RetriesExhausted' },
      requestPayload: { 'detail-type': 'Preview Redeploy Requested', detail: { prNumber: 'one' } },
      responsePayload: { errorType: 'MalformedEvent' },
    });
    const logged = h.logs
      .map((l) => JSON.parse(l))
      .find((l) => l.message === 'malformed event' && l.eventId === eventIds[0]);
    expect(logged).toMatchObject({ level: 'error', rule: 'previewRedeployRequested', reason });
    expect((await call(h, 'GET', '/healthz')).status).toBe(200);
    // Nothing changed.
    expect((await call(h, 'GET', path(1), { headers: auth })).body.status).toBe('ready');
  });

  test('an event file the bus cannot take is set aside, not retried forever', async () => {
    const file = queueLocalEvents(h.dataDir, []).file;
    writeFileSync(file, '{"source": "x"');
    await settle();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.rejected`)).toBe(true);
  });

  test('previewctl refuses an EVENT.json that holds no event, saying why', async () => {
    writeFileSync(join(h.dataDir, 'BAD.json'), JSON.stringify({ 'detail-type': 'x', detail: {} }));
    expect(await previewctl(h.dataDir, 'events', 'put', '--file', 'BAD.json')).toEqual({
      code: 2,
      out: { error: 'BAD.json: the event: source is required' },
    });
  });
});

describe('expiry', () => {
  test('`previewctl apps update --ttl-hours`: past its ttl without a deploy, a PR preview is torn down', async () => {
    const res = await previewctl(
      h.dataDir,
      'apps',
      'update',
      '--org',
      h.org.orgId,
      '--app',
      applicationId,
      '--ttl-hours',
      '0.0003',
    );
    expect(res).toEqual({
      code: 0,
      out: {
        applicationId,
        repoFullName: 'acme/bus',
        ttlHours: 0.0003,
        deployDrafts: false,
        disabled: false,
        factoryApp: null,
        factoryPath: null,
        allowedOrigins: [],
        skipLabel: 'no-preview',
        requireLabel: null,
        paths: [],
        skipAuthors: [],
      },
    });
    expect((await getApplication(h.org.orgId, applicationId)).ttlHours).toBe(0.0003);
    const two = await deploy(2);
    expect(two.status).toBe('ready');
    // The main-branch environment never expires.
    const main = await call(h, 'POST', `/v1/preview/applications/${applicationId}/0`, { headers: auth });
    expect(main.status).toBe(202);
    await settle();
    await status(0);

    await new Promise((r) => setTimeout(r, 1_300)); // 0.0003 h = 1.08 s
    await h.service.expiry.runNow();
    await settle();
    expect(await status(2, (s) => s.status === 'torn_down')).toMatchObject({ urls: {} });
    expect(await status(1, (s) => s.status === 'torn_down')).toMatchObject({ status: 'torn_down' });
    expect((await status(0, () => true)).status).toBe('ready');
    expect(deploymentStates(h.dataDir, 'acme/bus', 'preview/pr-2').at(-1)?.state).toBe('inactive');
    expect(lastComment(h.dataDir, 'acme/bus', 2)).toContain('### Preview environment: torn down');
  }, 60_000);

  test('ttl 0: never', async () => {
    await updateApplication(h.org.orgId, applicationId, { ttlHours: 0 });
    const three = await deploy(3);
    expect(three.status).toBe('ready');
    await new Promise((r) => setTimeout(r, 1_300));
    await h.service.expiry.runNow();
    await settle();
    expect((await status(3, () => true)).status).toBe('ready');
  }, 30_000);

  test('the default is 72 hours', async () => {
    const repo = 'acme/defaults';
    makeRepo(h.gitRoot, repo, { 'preview.yaml': TWO_APPS, 'server.js': SERVER_JS, VERSION: 'v1' });
    const app = await createApplication({ orgId: h.org.orgId, repoFullName: repo });
    expect(app.ttlHours).toBeUndefined();
    const res = await previewctl(
      h.dataDir,
      'apps',
      'update',
      '--org',
      h.org.orgId,
      '--app',
      app.applicationId,
      '--deploy-drafts',
    );
    expect(res.out).toMatchObject({ ttlHours: 72, deployDrafts: true });
    expect(
      (
        await previewctl(
          h.dataDir,
          'apps',
          'update',
          '--org',
          h.org.orgId,
          '--app',
          app.applicationId,
          '--ttl-hours',
          'soon',
        )
      ).code,
    ).toBe(2);
  }, 30_000);

  test('work a failed start left stranded is started again by the sweep: a deploy, a teardown', async () => {
    // Ready environments, then the write of a deploy request (6) and of a teardown request (7) without
    // the start that follows it (what a Step Functions outage past every retry leaves), dated as long ago.
    const before = await deploy(6);
    expect(before.status).toBe('ready');
    const pidBefore = (await hit(before.urls.web!)).pid;
    expect((await deploy(7)).status).toBe('ready');
    expect((await deploy(8)).status).toBe('ready');
    const strand = (pr: number, set: string, values: Record<string, unknown>) =>
      ddb().send(
        new UpdateCommand({
          TableName: table('environments'),
          Key: { orgId: h.org.orgId, envKey: keys.environments.envKey('acme/bus', pr) },
          UpdateExpression: `SET ${set}, updatedAt = :then ADD generation :one`,
          ...(set.includes('#status') ? { ExpressionAttributeNames: { '#status': 'status' } } : {}),
          ExpressionAttributeValues: { ...values, ':one': 1 },
        }),
      );
    const ago = (ms: number) => new Date(Date.now() - ms - 60_000).toISOString();
    await strand(6, '#status = :pending, phase = :queued', {
      ':pending': 'pending',
      ':queued': 'queued',
      ':then': ago(STRANDED_DEPLOY_MS),
    });
    await strand(7, 'tornDownRequested = :t, phase = :phase', {
      ':t': true,
      ':phase': 'tearing-down',
      ':then': ago(STRANDED_TEARDOWN_MS),
    });
    // A request made just now is not stranded, whatever its state: its state machine may be starting.
    await strand(8, '#status = :pending, phase = :queued', {
      ':pending': 'pending',
      ':queued': 'queued',
      ':then': new Date().toISOString(),
    });
    const get = async (pr: number) => (await call<Status>(h, 'GET', path(pr), { headers: auth })).body;
    expect(await get(6)).toMatchObject({ status: 'pending', phase: 'queued' });

    const swept = (await h.service.expiry.runNow()) as { restarted: number };
    expect(swept.restarted).toBe(2);
    await settle();
    // Deployed again at its new generation: new app processes, answering.
    const six = await status(6);
    expect(six).toMatchObject({ status: 'ready' });
    expect((await hit(six.urls.web!)).pid).not.toBe(pidBefore);
    expect((await hit(six.urls.web!)).version).toBe('v1');
    expect(await status(7, (s) => s.status === 'torn_down')).toMatchObject({ urls: {} });
    expect(await get(8)).toMatchObject({ status: 'pending', phase: 'queued' });
  }, 60_000);
});
