import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import { ConflictError, NotFoundError, ValidationError } from '../../shared/errors.js';
import {
  listQuarantined,
  quarantineCap,
  quarantineEnd,
  quarantinesOf,
  quarantineTest,
  unquarantineTest,
} from './quarantine.js';

/*
 * Quarantines at the SDK boundary: a small in-memory table behind the document client that honours the
 * conditions the writes carry (a new item, or the revision read), so the cap holds against a racing
 * writer as it would against DynamoDB.
 */
useAwsSettings();

const NOW = new Date('2030-03-01T12:00:00.000Z');
const dynamo = mockClient(DynamoDBDocumentClient);
let tenancy: Map<string, Record<string, unknown>>;
let puts: number;

const testItem = (testId: string, orgId = 'org-1', runOnPreview = true) => ({
  testId,
  orgId,
  name: `Test ${testId}`,
  applicationId: 'app-1',
  ...(runOnPreview ? { runOnPreview: true } : {}),
});

function withApp(previewTests: number) {
  const ids = Array.from({ length: previewTests }, (_, i) => `t${i + 1}`);
  const tests = new Map(ids.map((id) => [id, testItem(id)]));
  tests.set('plain', testItem('plain', 'org-1', false));
  tests.set('theirs', testItem('theirs', 'org-2'));
  dynamo.on(GetCommand).callsFake(async (input: { TableName: string; Key: Record<string, string> }) => {
    await new Promise((r) => setImmediate(r));
    if (input.TableName === 't-tests') return { Item: tests.get(input.Key.testId!) };
    if (input.TableName === 't-applications')
      return { Item: { applicationId: 'app-1', orgId: 'org-1', previewTestIds: new Set(ids) } };
    const item = tenancy.get(input.Key.pk!);
    return { Item: item ? structuredClone(item) : undefined };
  });
  dynamo.on(QueryCommand).resolves({ Items: [{ applicationId: 'app-1', orgId: 'org-1' }] });
}

beforeEach(() => {
  dynamo.reset();
  tenancy = new Map();
  puts = 0;
  dynamo.on(PutCommand).callsFake(async (input: { Item: Record<string, unknown> } & Record<string, any>) => {
    await new Promise((r) => setImmediate(r));
    const current = tenancy.get(input.Item.pk as string);
    const ok =
      input.ConditionExpression === 'attribute_not_exists(pk)'
        ? current === undefined
        : current?.rev === input.ExpressionAttributeValues[':rev'];
    if (!ok) throw new ConditionalCheckFailedException({ message: 'conditional', $metadata: {} });
    puts++;
    tenancy.set(input.Item.pk as string, structuredClone(input.Item));
    return {};
  });
});

const ask = { owner: 'alice', reason: 'flaky login redirect' };

describe('the end of a quarantine', () => {
  test('defaults to 30 days; a date names its whole day; past 30 days, past or not a date is refused', () => {
    expect(quarantineEnd(undefined, NOW)).toBe('2030-03-31T12:00:00.000Z');
    expect(quarantineEnd('2030-03-31', NOW)).toBe('2030-03-31T23:59:59.000Z');
    expect(quarantineEnd('2030-03-10T00:00:00Z', NOW)).toBe('2030-03-10T00:00:00.000Z');
    expect(() => quarantineEnd('2030-04-01', NOW)).toThrow(/at most 30 days \(until 2030-03-31\)/);
    expect(() => quarantineEnd('2030-02-28', NOW)).toThrow(ValidationError);
    expect(() => quarantineEnd('soon', NOW)).toThrow(/until: must be a date/);
  });

  test('the cap is a fifth of the run_on_preview tests, at least one', () => {
    expect([1, 4, 5, 9, 10, 24, 25].map(quarantineCap)).toEqual([1, 1, 1, 1, 2, 4, 5]);
  });
});

describe('quarantining a test', () => {
  test('records owner, reason and end; a second test past the cap is refused and nothing changes', async () => {
    withApp(5);
    const q = await quarantineTest('org-1', 't1', ask, NOW);
    expect(q).toEqual({
      test_id: 't1',
      test_name: 'Test t1',
      application_id: 'app-1',
      owner: 'alice',
      reason: 'flaky login redirect',
      until: '2030-03-31T12:00:00.000Z',
      since: NOW.toISOString(),
    });
    const before = structuredClone([...tenancy.entries()]);
    await expect(quarantineTest('org-1', 't2', ask, NOW)).rejects.toThrow(
      /at most 1 of this application's run_on_preview tests .* quarantined now: t1/,
    );
    expect([...tenancy.entries()]).toEqual(before);
    // The same test again replaces its quarantine rather than counting twice.
    const again = await quarantineTest('org-1', 't1', { owner: 'bob', reason: 'still flaky' }, NOW);
    expect(again.owner).toBe('bob');
    expect((await listQuarantined('org-1', {}, NOW)).map((x) => [x.test_id, x.owner])).toEqual([
      ['t1', 'bob'],
    ]);
  });

  test('ten run_on_preview tests allow two at once', async () => {
    withApp(10);
    await quarantineTest('org-1', 't1', ask, NOW);
    await quarantineTest('org-1', 't2', ask, NOW);
    await expect(quarantineTest('org-1', 't3', ask, NOW)).rejects.toThrow(ConflictError);
  });

  test('an ended quarantine no longer counts, is not listed, and its test is judged again', async () => {
    withApp(5);
    await quarantineTest('org-1', 't1', { ...ask, until: '2030-03-02T00:00:00Z' }, NOW);
    const later = new Date('2030-03-03T00:00:00Z');
    expect(await listQuarantined('org-1', {}, later)).toEqual([]);
    await quarantineTest('org-1', 't2', ask, later);
    expect((await listQuarantined('org-1', {}, later)).map((x) => x.test_id)).toEqual(['t2']);
    // The write of t2 dropped t1's ended entry: the gate sees t2 only.
    expect([...(await quarantinesOf('org-1', ['app-1', 'app-1'])).keys()]).toEqual(['t2']);
  });

  test("another organization's test is not found; a test not run on previews is refused; nothing is written", async () => {
    withApp(5);
    await expect(quarantineTest('org-1', 'theirs', ask, NOW)).rejects.toThrow(NotFoundError);
    await expect(quarantineTest('org-1', 'nope', ask, NOW)).rejects.toThrow(NotFoundError);
    await expect(quarantineTest('org-1', 'plain', ask, NOW)).rejects.toThrow(/only a run_on_preview test/);
    await expect(quarantineTest('org-1', 't1', { ...ask, until: '2031-01-01' }, NOW)).rejects.toThrow(
      ValidationError,
    );
    expect(puts).toBe(0);
  });

  test('two quarantines racing for the last place: one wins, the other is refused by the cap', async () => {
    withApp(5);
    const results = await Promise.allSettled([
      quarantineTest('org-1', 't1', ask, NOW),
      quarantineTest('org-1', 't2', ask, NOW),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(
      ((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason as Error).message,
    ).toMatch(/at most 1/);
    expect(await listQuarantined('org-1', {}, NOW)).toHaveLength(1);
  });
});

describe('unquarantining a test', () => {
  test('ends it now; a test not quarantined answers 404', async () => {
    withApp(5);
    await expect(unquarantineTest('org-1', 't1', NOW)).rejects.toThrow(NotFoundError);
    await quarantineTest('org-1', 't1', ask, NOW);
    expect((await unquarantineTest('org-1', 't1', NOW)).test_id).toBe('t1');
    expect(await listQuarantined('org-1', {}, NOW)).toEqual([]);
    await expect(unquarantineTest('org-1', 'theirs', NOW)).rejects.toThrow(NotFoundError);
  });
});
