import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { tableNames, tables } from '../../manifest/tables.js';
import { setLogSink } from '../../shared/log.js';
import {
  assertDeploySlot,
  describeFairShare,
  MAX_LEASE,
  raisedBy,
  resetLeases,
  takeRequest,
  WINDOW_SECONDS,
} from './fair-share.js';

/*
 * The fair share's request limiter at the SDK boundary: how many writes it makes (leases that grow 1, 2,
 * 4 … MAX_LEASE), what each write says (a conditional ADD that never passes the window's budget), and
 * what it answers once the budget is spent; the deploy slot's paging. Budget here: 30/s → 300 a window.
 */
const saved = { ...process.env };
Object.assign(process.env, {
  PREVIEW_MODE: 'aws',
  AWS_REGION: 'eu-west-1',
  PREVIEW_ORG_REQUESTS_PER_SECOND: '30',
  PREVIEW_ORG_CONCURRENT_DEPLOYS: '2',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
});
afterAll(() => {
  process.env = saved;
});
const logs: string[] = [];
setLogSink((line) => logs.push(line));

const dynamo = mockClient(DynamoDBDocumentClient);
const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
beforeEach(() => {
  dynamo.reset();
  resetLeases();
  logs.length = 0;
});

const refused = () =>
  new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });

/** The window's counter as DynamoDB keeps it: the conditional ADD refused past `budget`. */
function modelCounter(budget: number) {
  let taken = 0;
  dynamo.on(UpdateCommand).callsFake((input: { ExpressionAttributeValues: Record<string, number> }) => {
    const n = input.ExpressionAttributeValues[':n']!;
    if (taken > input.ExpressionAttributeValues[':room']! || taken + n > budget) throw refused();
    taken += n;
    return {};
  });
  return { taken: () => taken };
}
/** Let the leases taken ahead (promises on the mock) settle. */
const settle = () => new Promise((r) => setImmediate(r));

describe('takeRequest', () => {
  test(`leases grow 1, 2, 4 … ${MAX_LEASE}, taken ahead: 100 requests make at most 13 writes`, async () => {
    const counter = modelCounter(300);
    for (let i = 0; i < 100; i++) await takeRequest('org1', T0 + i);
    await settle();
    const leases = dynamo
      .commandCalls(UpdateCommand)
      .map((c) => c.args[0].input.ExpressionAttributeValues![':n'] as number);
    expect(leases.slice(0, 3)).toEqual([1, 2, 4]);
    expect(Math.max(...leases)).toBeLessThanOrEqual(MAX_LEASE);
    expect(leases.length).toBeLessThanOrEqual(13);
    // Every request had a token; the container holds fewer than MAX_LEASE unused ones.
    expect(counter.taken()).toBeGreaterThanOrEqual(100);
    expect(counter.taken() - 100).toBeLessThan(MAX_LEASE);
    const first = dynamo.commandCalls(UpdateCommand)[0]!.args[0].input;
    expect(first).toMatchObject({
      TableName: 't-quotas',
      Key: { pk: `RATE#org1#${T0 / 1000}` },
      UpdateExpression: 'ADD #taken :n SET #exp = if_not_exists(#exp, :exp)',
      ConditionExpression: 'attribute_not_exists(#taken) OR #taken <= :room',
      ExpressionAttributeValues: { ':n': 1, ':room': 299, ':exp': T0 / 1000 + 2 * WINDOW_SECONDS },
    });
  });

  test('a request with budget left never waits for a write: the next lease is taken ahead', async () => {
    modelCounter(300);
    for (let i = 0; i < 3; i++) await takeRequest('org1', T0);
    await settle();
    // From now on every write hangs until released: requests with tokens left must still go through.
    const pending: (() => void)[] = [];
    let writes = 0;
    dynamo.on(UpdateCommand).callsFake(() => {
      writes++;
      return new Promise((ok) => pending.push(() => ok({})));
    });
    let admitted = 0;
    const waiting: Promise<void>[] = [];
    for (let i = 0; i < 20; i++)
      waiting.push(
        takeRequest('org1', T0).then(() => {
          admitted++;
        }),
      );
    await settle();
    // The tokens on hand were admitted at once; one lease is in flight for the rest, not one per request.
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThan(20);
    expect(writes).toBe(1);
    while (pending.length) {
      pending.shift()!();
      await settle();
    }
    await Promise.all(waiting);
    expect(admitted).toBe(20);
  });

  test('a new window starts again at a lease of 1, on its own counter', async () => {
    dynamo.on(UpdateCommand).resolves({});
    for (let i = 0; i < 3; i++) await takeRequest('org1', T0 + i);
    await takeRequest('org1', T0 + WINDOW_SECONDS * 1000);
    const calls = dynamo.commandCalls(UpdateCommand).map((c) => c.args[0].input);
    // 4: taken ahead once the window needed a second lease; the new window's first lease is 1 again.
    expect(calls.map((c) => c.ExpressionAttributeValues![':n'])).toEqual([1, 2, 4, 1]);
    expect(calls[3]!.Key).toEqual({ pk: `RATE#org1#${T0 / 1000 + WINDOW_SECONDS}` });
  });

  test('when a lease would pass the budget, one token is tried; when none is left, 429 with the seconds to the next window', async () => {
    const counter = modelCounter(300);
    let admitted = 0;
    let refused429 = 0;
    for (let i = 0; i < 400; i++) {
      try {
        await takeRequest('org1', T0 + 2_500);
        admitted++;
      } catch (err) {
        expect(err).toMatchObject({
          statusCode: 429,
          retryAfterSeconds: 8,
          message:
            'too many requests: this organization may make 300 requests per 10 seconds (30/s); retry after 8 s; ' +
            "the deploy's context key orgRequestsPerSecond raises this limit (cdk deploy -c orgRequestsPerSecond=N; 0 turns it off)",
        });
        refused429++;
      }
      await settle();
    }
    // Never past the budget; everything leased was used (one container: the lease ahead shrinks to fit).
    expect(counter.taken()).toBe(300);
    expect(admitted).toBe(300);
    expect(refused429).toBe(100);
    const leases = dynamo
      .commandCalls(UpdateCommand)
      .map((c) => c.args[0].input.ExpressionAttributeValues![':n'] as number);
    expect(leases).toContain(1);
  });

  test('organizations have their own counters', async () => {
    dynamo.on(UpdateCommand).resolves({});
    await takeRequest('a', T0);
    await takeRequest('b', T0);
    expect(dynamo.commandCalls(UpdateCommand).map((c) => c.args[0].input.Key)).toEqual([
      { pk: `RATE#a#${T0 / 1000}` },
      { pk: `RATE#b#${T0 / 1000}` },
    ]);
  });

  test('fails open: a table that cannot be written admits the request and logs a warning', async () => {
    dynamo.on(UpdateCommand).rejects(Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
    await expect(takeRequest('org1', T0)).resolves.toBeUndefined();
    expect(logs.join('\n')).toMatch(/request limiter unavailable: request admitted.*ThrottlingException/);
  });
});

describe('assertDeploySlot', () => {
  test('counts in-flight environments across pages; the environment asked for takes no new slot', async () => {
    dynamo
      .on(QueryCommand)
      .resolvesOnce({ Items: [{ envKey: 'acme/a#1' }], LastEvaluatedKey: { orgId: 'o', envKey: 'acme/a#1' } })
      .resolves({ Items: [{ envKey: 'acme/a#2' }] });
    await expect(assertDeploySlot('o', 'acme/a#3')).rejects.toMatchObject({ statusCode: 429 });
    expect(dynamo.commandCalls(QueryCommand)[1]!.args[0].input.ExclusiveStartKey).toEqual({
      orgId: 'o',
      envKey: 'acme/a#1',
    });
    dynamo.reset();
    dynamo.on(QueryCommand).resolves({ Items: [{ envKey: 'acme/a#1' }, { envKey: 'acme/a#2' }] });
    await expect(assertDeploySlot('o', 'acme/a#2')).resolves.toBeUndefined();
  });
});

describe('what raises a limit, and the limits npm start prints', () => {
  test('locally the environment variable, in AWS the context key', () => {
    expect(raisedBy('requestsPerSecond', 'local')).toBe(
      'PREVIEW_ORG_REQUESTS_PER_SECOND raises this limit (0 turns it off)',
    );
    expect(raisedBy('concurrentDeploys', 'local')).toBe(
      'PREVIEW_ORG_CONCURRENT_DEPLOYS raises this limit (0 turns it off)',
    );
    expect(raisedBy('concurrentRuns', 'aws')).toBe(
      "the deploy's context key orgConcurrentRuns raises this limit (cdk deploy -c orgConcurrentRuns=N; 0 turns it off)",
    );
  });

  test('the limits in force, each with its variable; 0 is said as no limit', () => {
    expect(describeFairShare({ requestsPerSecond: 20, concurrentDeploys: 0, concurrentRuns: 10 })).toBe(
      'fair share per organization: 20 requests/s (PREVIEW_ORG_REQUESTS_PER_SECOND), no limit of deploys in ' +
        'flight (PREVIEW_ORG_CONCURRENT_DEPLOYS), 10 runs in flight (PREVIEW_ORG_CONCURRENT_RUNS); past one, ' +
        '429 (0 turns a limit off)',
    );
    // This file's configuration (30/s, 2 deploys; runs as test/support/env.ts sets them for every test).
    expect(describeFairShare()).toMatch(
      /^fair share per organization: 30 requests\/s .*, 2 deploys in flight .*, \d+ runs in flight/,
    );
  });
});
