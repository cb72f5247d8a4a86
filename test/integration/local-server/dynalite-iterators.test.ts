import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand, QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { AbstractKeyIterator, AbstractLevel, AbstractValueIterator } from 'abstract-level';
import { localDynamoClientConfig } from '../../../functions/shared/aws/dynamo.js';
import {
  type EmbeddedDynamo,
  ensureTables,
  localTableName,
  startDynalite,
} from '../../../lib/local/dynalite.js';

/*
 * Memory that does not grow: dynalite 4.0.0 ends the LevelDB iterator behind every query and scan with
 * `iterator.return()`, which abstract-level 3 iterators lack, so none was closed and the local server grew
 * without bound. lib/local/dynalite.ts gives them that method. Every open iterator is a resource its
 * database holds until closed (`attachResource` / `detachResource`), so counting those counts the leak.
 */

const live = new Set<object>();
type Resources = { attachResource(r: object): void; detachResource(r: object): void };
const proto = AbstractLevel.prototype as unknown as Resources;
const { attachResource, detachResource } = proto;

let dir: string;
let dynamo: EmbeddedDynamo;
let doc: DynamoDBDocumentClient;
const runs = localTableName('runs');

beforeAll(async () => {
  proto.attachResource = function (this: Resources, r: object) {
    live.add(r);
    return attachResource.call(this, r);
  };
  proto.detachResource = function (this: Resources, r: object) {
    live.delete(r);
    return detachResource.call(this, r);
  };
  dir = mkdtempSync(join(tmpdir(), 'dynalite-iterators-'));
  dynamo = await startDynalite(join(dir, 'db'));
  await ensureTables(dynamo.endpoint);
  doc = DynamoDBDocumentClient.from(
    new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(dynamo.endpoint) }),
  );
  for (let i = 0; i < 30; i++) {
    await doc.send(
      new PutCommand({
        TableName: runs,
        Item: {
          runId: `run-${i}`,
          orgId: 'org-1',
          createdKey: `2026-01-01T00:00:${String(i).padStart(2, '0')}#${i}`,
        },
      }),
    );
  }
});
afterAll(async () => {
  doc.destroy();
  await dynamo.stop();
  rmSync(dir, { recursive: true, force: true });
  proto.attachResource = attachResource;
  proto.detachResource = detachResource;
});

/** `n` queries by index (paged and whole) and scans, as GET /run and the sweeps issue them. */
async function queries(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await doc.send(new ScanCommand({ TableName: runs, Limit: 5 }));
    await doc.send(new ScanCommand({ TableName: runs }));
    await doc.send(
      new QueryCommand({
        TableName: runs,
        KeyConditionExpression: 'runId = :r',
        ExpressionAttributeValues: { ':r': `run-${i % 30}` },
      }),
    );
  }
}

const settle = () => new Promise((r) => setTimeout(r, 50));

describe('dynalite on abstract-level 3', () => {
  test('every query and scan closes its LevelDB iterator: none stays open after 600 of them', async () => {
    await settle();
    const before = live.size;
    await queries(200);
    await settle();
    expect(live.size - before).toBeLessThanOrEqual(0);
  });

  test('without the shim dynalite still leaks one iterator per query (remove the shim when this fails)', async () => {
    // If a dynalite release closes its iterators itself, this fails: the shim in lib/local/dynalite.ts
    // is then dead code, to be removed along with this test.
    const shims = [AbstractKeyIterator, AbstractValueIterator].map((it) => {
      const p = it.prototype as unknown as { return?: () => Promise<void> };
      const shim = p.return;
      delete p.return;
      return () => {
        p.return = shim;
      };
    });
    await settle();
    const before = live.size;
    try {
      await queries(20);
      await settle();
      expect(live.size - before).toBeGreaterThanOrEqual(40);
    } finally {
      for (const restore of shims) restore();
    }
  });
});
