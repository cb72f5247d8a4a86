import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { tableNames, tables } from '../../manifest/tables.js';
import type { CheckRunWrite } from '../../ports/pr-status/port.js';
import { bring, type GateDeps, type GateRecord } from './gate.js';

/*
 * Two writers bringing the same head's check run at once (a deploy request beside a webhook, two runs
 * ending together): one creates it on GitHub and the other waits for its claim, then finds the record
 * showing what it would write, so the head gets one check run. DynamoDB at the SDK boundary: a record in
 * memory whose claim honours its condition as DynamoDB would.
 */
const saved = { ...process.env };
Object.assign(process.env, {
  PREVIEW_MODE: 'aws',
  AWS_REGION: 'eu-west-1',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
});
afterAll(() => {
  process.env = saved;
});

const SHA = 'a'.repeat(40);
const dynamo = mockClient(DynamoDBDocumentClient);
let stored: GateRecord & Record<string, unknown>;
const tick = () => new Promise((r) => setTimeout(r, 5));

beforeEach(() => {
  dynamo.reset();
  stored = {
    pk: `CHECK#org-1#acme/web#7#${SHA}`,
    orgId: 'org-1',
    envKey: 'acme/web#7',
    repoFullName: 'acme/web',
    prNumber: 7,
    sha: SHA,
    story: 1,
    state: 'queued',
    createdAt: '2030-01-01T00:00:00.000Z',
  };
  dynamo.on(GetCommand).callsFake(async (input: { TableName: string }) => {
    await tick();
    if (input.TableName === 't-environments')
      return {
        Item: {
          orgId: 'org-1',
          envKey: 'acme/web#7',
          prNumber: 7,
          status: 'deploying',
          inputs: { headSha: SHA },
        },
      };
    return { Item: structuredClone(stored) };
  });
  dynamo
    .on(UpdateCommand)
    .callsFake(async (input: { UpdateExpression: string; ExpressionAttributeValues: any }) => {
      await tick();
      const v = input.ExpressionAttributeValues;
      const fail = () => {
        throw new ConditionalCheckFailedException({ message: 'conditional', $metadata: {} });
      };
      if (input.UpdateExpression.startsWith('SET writer')) {
        if (stored.writer !== undefined && (stored.writerUntil as number) >= v[':now']) fail();
        Object.assign(stored, { writer: v[':token'], writerUntil: v[':until'] });
        return {};
      }
      if (input.UpdateExpression.startsWith('REMOVE writer')) {
        if (stored.writer !== v[':token']) fail();
        delete stored.writer;
        delete stored.writerUntil;
        return {};
      }
      if (stored.writer !== v[':token'] || stored.story !== v[':story'] || stored.state === 'completed')
        fail();
      Object.assign(stored, { checkRunId: v[':id'], state: v[':state'], shown: v[':shown'] });
      return { Attributes: structuredClone(stored) };
    });
});

function github() {
  const created: CheckRunWrite[] = [];
  const updated: [number, CheckRunWrite][] = [];
  const deps: GateDeps = {
    prStatus: {
      createCheckRun: async (w) => {
        created.push(w);
        await new Promise((r) => setTimeout(r, 50));
        return 900 + created.length;
      },
      updateCheckRun: async (id, w) => {
        updated.push([id, w]);
      },
    },
  };
  return { deps, created, updated };
}

describe('bring: one check run per head', () => {
  test('two writers racing on a head with no check run yet: one POST, both see its id', async () => {
    const { deps, created, updated } = github();
    const [a, b] = await Promise.all([
      bring(deps, structuredClone(stored)),
      bring(deps, structuredClone(stored)),
    ]);
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ name: 'Preview tests', sha: SHA, status: 'queued' });
    // The waiting writer found the record showing what it would write: no PATCH either.
    expect(updated).toEqual([]);
    expect([a.checkRunId, b.checkRunId]).toEqual([901, 901]);
    expect(stored.writer).toBeUndefined();
  });

  test('a claim left by a writer that died is taken over once it expires', async () => {
    const { deps, created } = github();
    Object.assign(stored, { writer: 'dead', writerUntil: Date.now() - 1 });
    const record = await bring(deps, structuredClone(stored));
    expect(created).toHaveLength(1);
    expect(record.checkRunId).toBe(901);
  });

  test('a live claim makes a writer wait, then write once it is let go', async () => {
    const { deps, created } = github();
    Object.assign(stored, { writer: 'someone', writerUntil: Date.now() + 60_000 });
    const started = Date.now();
    const pending = bring(deps, structuredClone(stored));
    await new Promise((r) => setTimeout(r, 300));
    expect(created).toEqual([]); // waiting on the live claim, not writing
    delete stored.writer;
    delete stored.writerUntil;
    expect((await pending).checkRunId).toBe(901);
    expect(created).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });
});
