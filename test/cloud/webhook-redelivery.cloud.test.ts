import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { setLogSink } from '../../functions/shared/log.js';
import { deliver, prPayload } from '../support/webhooks.js';
import type { Cloud } from './cloud-tier.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * Failed webhook deliveries, asked for again, in the cloud simulation tier: a delivery whose events the
 * bus refuses is answered 5xx and its claim released; GitHub (the fake, where the test records each
 * attempt as GitHub would) does not redeliver it by itself, the `webhookRedelivery` schedule's handler
 * asks it to; the redelivery (same GUID) is then accepted and acted on, and the next run asks nothing.
 */

const APP_ID = '626262';
const INSTALLATION = 9;
const HOOK_SECRET = 'hook-secret';
const BUS = 'preview-events';
const ENTRY = 'functions/events/webhook-redelivery.ts';
const scheduled = () => ({
  version: '0',
  id: 'sched-1',
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  time: new Date().toISOString(),
  resources: [],
  detail: {},
});

let cloud: Cloud;
let github: FakeGitHub;
let sha: string;
let claimOf: (guid: string) => Promise<unknown>;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, github, sha } = await startGitHubApp(
    'cloud-redelivery',
    { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n' },
    { env: { EVENT_BUS_NAME: BUS }, appId: APP_ID, installationId: INSTALLATION, webhookSecret: HOOK_SECRET },
  ));
  // Small pages, so the listing follows the Link header.
  github.deliveriesPageSize = 2;
  const { ddb, table } = await import('../../functions/shared/aws/dynamo.js');
  const { GetCommand } = await import('@aws-sdk/lib-dynamodb');
  const { keys: tableKeys } = await import('../../functions/manifest/tables.js');
  claimOf = async (guid) =>
    (
      await ddb().send(
        new GetCommand({
          TableName: table('deliveries'),
          Key: { deliveryId: tableKeys.deliveries.github(guid) },
          ConsistentRead: true,
        }),
      )
    ).Item;
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

type Entry = { EventBusName: string; Source: string; DetailType: string; Detail: string };
const entries = () => cloud.aws.events as Entry[];
const payload = () => prPayload('opened', { number: 11, sha, installationId: INSTALLATION });

describe('a delivery the bus refused, redelivered on request', () => {
  let failed: Awaited<ReturnType<typeof deliver>>;
  let failedAttempt: number;
  let body: ReturnType<typeof payload>;

  test('the bus refuses its events: 5xx, nothing published, the claim released', async () => {
    body = payload();
    // A 500 on every attempt the EventBridge client makes (the SDK's standard retry mode: 3).
    cloud.aws.failNext('EventBridge.PutEvents', 3);
    failed = await deliver(cloud, HOOK_SECRET, 'pull_request', body);
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(entries()).toEqual([]);
    expect(await claimOf(failed.deliveryId)).toBeUndefined();
    failedAttempt = github.recordDelivery(APP_ID, {
      guid: failed.deliveryId,
      statusCode: failed.status,
      event: 'pull_request',
      action: 'opened',
    });
  });

  test('the schedule asks GitHub to redeliver it, and only it', async () => {
    // Delivered (202): left alone.
    const ok = await deliver(
      cloud,
      HOOK_SECRET,
      'pull_request',
      prPayload('opened', { number: 12, sha, installationId: INSTALLATION }),
    );
    expect(ok.status).toBe(202);
    github.recordDelivery(APP_ID, { guid: ok.deliveryId, statusCode: ok.status, event: 'pull_request' });
    // Acted on, but GitHub timed out waiting (no status): our claim says so, left alone.
    github.recordDelivery(APP_ID, {
      guid: ok.deliveryId,
      statusCode: 0,
      event: 'pull_request',
      redelivery: true,
    });
    // Failed two days ago: outside the window.
    github.recordDelivery(APP_ID, {
      guid: '0a0a0a0a-0000-4000-8000-000000000000',
      statusCode: 502,
      event: 'push',
      deliveredAt: new Date(Date.now() - 2 * 24 * 3600_000),
    });

    const out = await cloud.invoke(ENTRY, scheduled());
    expect(out).toEqual({ checked: 2, redelivered: 1, gaveUp: 0 });
    expect(github.redeliveryRequests).toEqual([failedAttempt]);
    expect(github.calls()).toContain(`POST /app/hook/deliveries/${failedAttempt}/attempts`);
    // The listing followed the Link header past the first page.
    const listings = github.requests.filter((r) => r.path === '/app/hook/deliveries');
    expect(listings.length).toBeGreaterThan(1);
    expect(listings[1]!.query).toMatch(/cursor=/);
    // Logs name ids and counts, never the payload.
    expect(
      logs.some((l) => l.includes('webhook redelivery requested') && l.includes(failed.deliveryId)),
    ).toBe(true);
    expect(logs.join('\n')).not.toContain(sha);
  });

  test('the redelivery (same GUID) is accepted and acted on; the next run asks nothing', async () => {
    const again = await deliver(cloud, HOOK_SECRET, 'pull_request', body, { id: failed.deliveryId });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ accepted: true, deliveryId: failed.deliveryId, events: 1 });
    expect(await claimOf(failed.deliveryId)).toBeDefined();
    expect(entries().map((e) => JSON.parse(e.Detail).deliveryId)).toContain(failed.deliveryId);
    github.recordDelivery(APP_ID, {
      guid: failed.deliveryId,
      statusCode: again.status,
      event: 'pull_request',
      action: 'opened',
      redelivery: true,
    });

    const out = await cloud.invoke(ENTRY, scheduled());
    expect(out).toEqual({ checked: 2, redelivered: 0, gaveUp: 0 });
    expect(github.redeliveryRequests).toEqual([failedAttempt]);
  });
});
