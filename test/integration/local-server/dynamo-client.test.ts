import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  ddb,
  isConditionFailure,
  localDynamoClientConfig,
  table,
} from '../../../functions/shared/aws/dynamo.js';
import { type EmbeddedDynamo, ensureTables, startDynalite } from '../../../lib/local/dynalite.js';

/*
 * The DynamoDB client as functions/shared/aws/dynamo.ts configures it (the SDK's document client; its own
 * conversions are the SDK's business, not tested here): local mode through dynalite's Unix socket, as
 * `npm start` runs it; attributes whose value is undefined left out (what every optional field of an item
 * relies on: the SDK refuses them otherwise); numbers back as numbers; a failed condition recognised.
 */

let dir: string;
let dynamo: EmbeddedDynamo;
let raw: DynamoDBClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dynamo-client-'));
  dynamo = await startDynalite(join(dir, 'db'), { socket: join(dir, 'dynamodb.sock') });
  Object.assign(process.env, await ensureTables(dynamo.endpoint), {
    PREVIEW_MODE: 'local',
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    PREVIEW_DATA_DIR: dir,
  });
  raw = new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(dynamo.endpoint) });
}, 60_000);

afterAll(async () => {
  raw?.destroy();
  ddb().destroy();
  await dynamo?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const key = (envKey: string) => ({ orgId: 'org-1', envKey });

describe('ddb()', () => {
  test('is one client per container, reaching dynalite through its Unix socket', async () => {
    expect(dynamo.endpoint).toMatch(/^unix:\//);
    expect(ddb()).toBe(ddb());
    await ddb().send(new PutCommand({ TableName: table('environments'), Item: { ...key('a#1'), n: 1 } }));
    const { Item } = await ddb().send(new GetCommand({ TableName: table('environments'), Key: key('a#1') }));
    expect(Item).toEqual({ ...key('a#1'), n: 1 });
  });

  test('leaves out attributes whose value is undefined, at the top and nested, in items and values', async () => {
    const TableName = table('environments');
    await ddb().send(
      new PutCommand({
        TableName,
        Item: {
          ...key('a#2'),
          generation: 3,
          ratio: 0.25,
          lastError: undefined,
          urls: { web: 'http://127.0.0.1:1', api: undefined },
          tags: ['x', 'y'],
        },
      }),
    );
    await ddb().send(
      new UpdateCommand({
        TableName,
        Key: key('a#2'),
        UpdateExpression: 'SET #p = :p',
        ExpressionAttributeNames: { '#p': 'phase' },
        ExpressionAttributeValues: { ':p': { name: 'ready', detail: undefined }, ':unused': undefined },
      }),
    );
    const { Item } = await ddb().send(new GetCommand({ TableName, Key: key('a#2') }));
    expect(Item).toEqual({
      ...key('a#2'),
      generation: 3,
      ratio: 0.25,
      urls: { web: 'http://127.0.0.1:1' },
      tags: ['x', 'y'],
      phase: { name: 'ready' },
    });
    expect(Object.keys(Item!)).not.toContain('lastError');
    // As stored: a number attribute, no `lastError`, no `urls.api`.
    const stored = (
      await raw.send(new GetItemCommand({ TableName, Key: { orgId: { S: 'org-1' }, envKey: { S: 'a#2' } } }))
    ).Item!;
    expect(stored.generation).toEqual({ N: '3' });
    expect(stored.lastError).toBeUndefined();
    expect(stored.urls).toEqual({ M: { web: { S: 'http://127.0.0.1:1' } } });
  });

  test('isConditionFailure: true for a failed condition, false for other errors', async () => {
    const TableName = table('environments');
    const put = () =>
      ddb().send(
        new PutCommand({
          TableName,
          Item: key('a#3'),
          ConditionExpression: 'attribute_not_exists(orgId)',
        }),
      );
    await put();
    const failed = await put().catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(Error);
    expect(isConditionFailure(failed)).toBe(true);
    const invalid = await ddb()
      .send(new UpdateCommand({ TableName, Key: key('a#3'), UpdateExpression: 'SET #x = :x' }))
      .catch((err: unknown) => err);
    expect((invalid as Error).name).toBe('ValidationException');
    expect(isConditionFailure(invalid)).toBe(false);
    expect(isConditionFailure(new Error('ConditionalCheckFailedException'))).toBe(false);
  });
});
