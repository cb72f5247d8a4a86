import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { localDynamoClientConfig } from '../../../functions/shared/aws/dynamo.js';
import {
  type EmbeddedDynamo,
  ensureTables,
  localTableName,
  startDynalite,
  useBatchedQueries,
} from '../../../lib/local/dynalite.js';

/*
 * lib/local/dynalite.ts answers a plain Query by reading dynalite's iterator in batches instead of through
 * its stream chain (GET /run). The answer must be the one dynalite's own path gives: the same
 * Query, on the same data, through both paths, answers the same items, counts and LastEvaluatedKey.
 */

let dir: string;
let dynamo: EmbeddedDynamo;
let doc: DynamoDBDocumentClient;
const runs = localTableName('runs');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dynalite-query-'));
  dynamo = await startDynalite(join(dir, 'db'));
  await ensureTables(dynamo.endpoint);
  doc = DynamoDBDocumentClient.from(
    new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(dynamo.endpoint) }),
  );
  const items = Array.from({ length: 120 }, (_, i) => ({
    runId: `run-${String(i).padStart(3, '0')}`,
    orgId: i % 3 === 0 ? 'org-b' : 'org-a',
    createdKey: `2026-01-01T00:${String(Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.000Z#run-${i}`,
    testKey: `org-a#t${i % 4}`,
    status: i % 2 ? 'passed' : 'failed',
    // A few large index entries (`name` is projected), so the 1 MB page cut-off is reached too.
    name: i % 10 === 0 ? 'n'.repeat(300_000) : `run ${i}`,
    folder: { id: `f${i % 2}`, name: 'folder' },
  }));
  for (let i = 0; i < items.length; i += 25)
    await doc.send(
      new BatchWriteCommand({
        RequestItems: { [runs]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
      }),
    );
}, 60_000);

afterAll(async () => {
  useBatchedQueries(true);
  doc.destroy();
  await dynamo.stop();
  rmSync(dir, { recursive: true, force: true });
});

const queries: Record<string, Record<string, unknown>>[] = [
  { org: { IndexName: 'listOrg', Limit: 21 } },
  { orgBackwards: { IndexName: 'listOrg', ScanIndexForward: false, Limit: 21 } },
  { orgKeys: { IndexName: 'listOrg', ScanIndexForward: false, ProjectionExpression: 'createdKey' } },
  { pageAll: { IndexName: 'pageOrg', ScanIndexForward: false } },
  { pageNoLimit: { IndexName: 'pageOrg' } },
  { pageProjected: { IndexName: 'pageOrg', ProjectionExpression: 'runId, folder.id, #n', Limit: 7 } },
  { count: { IndexName: 'pageOrg', Select: 'COUNT', Limit: 30 } },
  { limitOne: { IndexName: 'pageOrg', ScanIndexForward: false, Limit: 1 } },
  { limitAll: { IndexName: 'pageOrg', ScanIndexForward: false, Limit: 80 } },
  { limitPast: { IndexName: 'pageOrg', ScanIndexForward: false, Limit: 500 } },
  { range: { IndexName: 'pageOrg', Range: 'begins_with', Limit: 10 } },
  { rangeBackwards: { IndexName: 'pageOrg', Range: '>', ScanIndexForward: false } },
  { filtered: { IndexName: 'pageOrg', FilterExpression: '#s = :s', Limit: 10 } },
  { test: { IndexName: 'pageTest', Key: 'testKey', Value: 'org-a#t1', ScanIndexForward: false, Limit: 5 } },
  { none: { IndexName: 'pageTest', Key: 'testKey', Value: 'org-a#nothing', Limit: 5 } },
  { table: { Key: 'runId', Value: 'run-005' } },
];

/** Every page of a Query (following LastEvaluatedKey), as dynalite answers it. */
async function pages(spec: Record<string, unknown>) {
  const {
    IndexName,
    Key = 'orgId',
    Value = 'org-a',
    Range,
    FilterExpression,
    ProjectionExpression,
  } = spec as {
    IndexName?: string;
    Key?: string;
    Value?: string;
    Range?: string;
    FilterExpression?: string;
    ProjectionExpression?: string;
  };
  const names: Record<string, string> = { '#k': Key };
  const values: Record<string, unknown> = { ':k': Value };
  let condition = '#k = :k';
  if (Range === 'begins_with') {
    condition += ' AND begins_with(createdKey, :r)';
    values[':r'] = '2026-01-01T00:01';
  } else if (Range === '>') {
    condition += ' AND createdKey > :r';
    values[':r'] = '2026-01-01T00:00:30';
  }
  if (FilterExpression) {
    names['#s'] = 'status';
    values[':s'] = 'passed';
  }
  if (ProjectionExpression?.includes('#n')) names['#n'] = 'name';
  const answers: unknown[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const { $metadata, ...answer } = await doc.send(
      new QueryCommand({
        TableName: runs,
        ...(IndexName ? { IndexName } : {}),
        KeyConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ...(FilterExpression ? { FilterExpression } : {}),
        ...(ProjectionExpression ? { ProjectionExpression } : {}),
        ...(spec.ScanIndexForward === false ? { ScanIndexForward: false } : {}),
        ...(spec.Limit ? { Limit: spec.Limit as number } : {}),
        ...(spec.Select ? { Select: spec.Select as 'COUNT' } : {}),
        ExclusiveStartKey: start,
      }),
    );
    answers.push(answer);
    start = answer.LastEvaluatedKey;
  } while (start && answers.length < 50);
  return answers;
}

test.each(queries.map((q) => Object.entries(q)[0]!))(
  'a %s Query answers the same through the batched path as through dynalite',
  async (_name, spec) => {
    useBatchedQueries(false);
    const theirs = await pages(spec);
    useBatchedQueries(true);
    const ours = await pages(spec);
    expect(ours).toEqual(theirs);
    expect(theirs.length).toBeGreaterThan(0);
  },
);

test('the 1 MB cut-off is reached and answered alike (entries of 300 KB)', async () => {
  const spec = { IndexName: 'pageOrg' };
  useBatchedQueries(false);
  const theirs = (await pages(spec)) as { Count: number; LastEvaluatedKey?: unknown }[];
  useBatchedQueries(true);
  expect(await pages(spec)).toEqual(theirs);
  expect(theirs.length).toBeGreaterThan(1);
  expect(theirs[0]!.LastEvaluatedKey).toBeDefined();
  expect(theirs.reduce((n, page) => n + page.Count, 0)).toBe(80);
});

test('the x-amz-crc32 header of an answer is the CRC-32 of its body, as buffer-crc32 reckons it', async () => {
  // buffer-crc32's own JavaScript loop (`signed`, which lib/local/dynalite.ts leaves alone), and the
  // `unsigned` that dynalite calls (native since lib/local/dynalite.ts was loaded).
  const crc = createRequire(createRequire(import.meta.url).resolve('dynalite'))('buffer-crc32') as {
    signed(buf: Buffer): number;
    unsigned(body: string | Buffer): number;
  };
  const reference = (buf: Buffer) => crc.signed(buf) >>> 0;
  expect((crc.unsigned as { native?: boolean }).native).toBe(true);
  for (const Limit of [1, 21, 200]) {
    const res = await fetch(dynamo.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'DynamoDB_20120810.Query',
        'x-amz-date': '20260101T000000Z',
        authorization:
          'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
      },
      body: JSON.stringify({
        TableName: runs,
        IndexName: 'pageOrg',
        KeyConditionExpression: '#k = :k',
        ExpressionAttributeNames: { '#k': 'orgId' },
        ExpressionAttributeValues: { ':k': { S: 'org-a' } },
        Limit,
      }),
    });
    const body = Buffer.from(await res.arrayBuffer());
    expect([res.status, res.status === 200 || body.toString()]).toEqual([200, true]);
    expect(Number(res.headers.get('x-amz-crc32'))).toBe(reference(body));
  }
  // Text is summed as its UTF-8 bytes, as buffer-crc32 does.
  for (const text of ['', 'abc', JSON.stringify({ name: 'héllo wörld ✓ 𝄞', n: 'x'.repeat(5000) })]) {
    expect(crc.unsigned(text)).toBe(reference(Buffer.from(text, 'utf8')));
    expect(crc.unsigned(Buffer.from(text))).toBe(reference(Buffer.from(text, 'utf8')));
  }
});
