import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { resolveVariables, startPreviewRuns } from './lifecycle.js';

describe('resolveVariables', () => {
  test('overrides saved names and ignores the rest', () => {
    expect(resolveVariables({ A: '1', B: '2' }, { B: 'x', C: 'y' })).toEqual({ A: '1', B: 'x' });
  });
  test('inherited names are neither overrides nor saved variables', () => {
    const saved = { toString: 'saved', A: '1' };
    expect(resolveVariables(saved, {})).toEqual({ toString: 'saved', A: '1' });
    expect(resolveVariables({ A: '1' }, JSON.parse('{"__proto__":"x","constructor":"y"}'))).toEqual({
      A: '1',
    });
  });
  test('an empty string is a real override', () => {
    expect(resolveVariables({ A: '1' }, { A: '' })).toEqual({ A: '' });
  });
});

describe('startPreviewRuns: once per start key', () => {
  /*
   * DynamoDB at the SDK boundary: the application's run_on_preview tests, their definitions, and a runs
   * table in memory whose put honours `attribute_not_exists(runId)` as DynamoDB does.
   */
  useAwsSettings();
  const dynamo = mockClient(DynamoDBDocumentClient);
  let stored: Map<string, Record<string, unknown>>;
  let started: string[];
  const workflows: Workflows = {
    start: async (_w, input, name) => {
      started.push(String(input.runId));
      return { executionId: name };
    },
    completeTask: async () => undefined,
    heartbeat: async () => true,
  };
  const env = { orgId: 'org-1', repoFullName: 'acme/web', prNumber: 7, environmentId: 'env-1' };
  /** The organization whose tests the table holds (the other organization's test: its own). */
  let testsOf = 'org-1';
  const test_ = (testId: string) => ({
    testId,
    orgId: testsOf,
    name: `Test ${testId}`,
    folder: { id: 'f', name: 'F' },
    applicationId: 'app-1',
    runOnPreview: true,
    applicationVersion: { name: 'web', path: '/' },
    steps: [],
  });

  beforeEach(() => {
    dynamo.reset();
    stored = new Map();
    started = [];
    testsOf = 'org-1';
    dynamo
      .on(QueryCommand)
      .resolves({ Items: [{ applicationId: 'app-1', previewTestIds: new Set(['t-1', 't-2']) }] });
    dynamo.on(GetCommand).callsFake(async (input: { Key: { testId: string } }) => ({
      Item: test_(input.Key.testId),
    }));
    dynamo.on(PutCommand).callsFake(async (input: { Item: { runId: string } }) => {
      if (stored.has(input.Item.runId))
        throw new ConditionalCheckFailedException({ message: 'conditional', $metadata: {} });
      stored.set(input.Item.runId, input.Item);
      return {};
    });
  });

  test('a retried start with the same key returns the same runs and starts none again', async () => {
    const key = 'acme/web#7@abc#3';
    const first = await startPreviewRuns({ workflows }, env, { startKey: key, gateKey: 'CHECK#g' });
    expect(first).toHaveLength(2);
    expect(started).toEqual(first);
    const again = await startPreviewRuns({ workflows }, env, { startKey: key, gateKey: 'CHECK#g' });
    expect(again).toEqual(first);
    expect(started).toEqual(first);
    expect(stored.size).toBe(2);
    expect([...stored.values()].map((r) => r.gateKey)).toEqual(['CHECK#g', 'CHECK#g']);
  });

  test('a start that died half-way: the retry starts only the runs it had not', async () => {
    const key = 'acme/web#7@abc#3';
    const full = await startPreviewRuns({ workflows }, env, { startKey: key });
    // Only the first test's run was stored and started before the task died.
    stored.delete(full[1]!);
    started = [];
    expect(await startPreviewRuns({ workflows }, env, { startKey: key })).toEqual(full);
    expect(started).toEqual([full[1]]);
  });

  test('another generation, another organization, or no key: new runs', async () => {
    const first = await startPreviewRuns({ workflows }, env, { startKey: 'acme/web#7@abc#3' });
    const next = await startPreviewRuns({ workflows }, env, { startKey: 'acme/web#7@abc#4' });
    testsOf = 'org-2';
    const other = await startPreviewRuns(
      { workflows },
      { ...env, orgId: 'org-2' },
      {
        startKey: 'acme/web#7@abc#3',
      },
    );
    testsOf = 'org-1';
    const unkeyed = await startPreviewRuns({ workflows }, env);
    expect(new Set([...first, ...next, ...other, ...unkeyed]).size).toBe(8);
    expect(started).toHaveLength(8);
  });
});
