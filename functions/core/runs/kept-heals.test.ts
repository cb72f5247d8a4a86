import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { tableNames, tables } from '../../manifest/tables.js';
import { keepHeals, planKeptHeals } from './kept-heals.js';

/*
 * Keeping a run's heals, at DynamoDB's SDK boundary: which healed steps become changes to the test, which
 * are skipped and why, and the one conditional write that keeps them.
 */
const saved = { ...process.env };
Object.assign(process.env, {
  AWS_REGION: 'eu-west-1',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
});
afterAll(() => {
  process.env = saved;
});

const dynamo = mockClient(DynamoDBDocumentClient);
const step = (id: string, selector: string, html = '') => ({
  id,
  instruction: `do ${id}`,
  interaction: 'click',
  url: '',
  element: { selector, html },
});
const test1 = {
  testId: 't1',
  orgId: 'org1',
  name: 'Sign up',
  steps: [
    step('s1', ''),
    step('s2', '#go', '<button id="go">Go</button>'),
    step('s3', '#x'),
    step('s4', '#y'),
  ],
};
const run = (over: Record<string, unknown> = {}) => ({
  runId: 'r1',
  orgId: 'org1',
  testId: 't1',
  status: 'passed',
  steps: [
    { ...step('s1', ''), status: 'passed', output: '' },
    {
      ...step('s2', '#go'),
      status: 'passed',
      output: 'healed',
      healed: {
        from: '#go',
        to: 'role=button[name="Go"]',
        score: 0.9,
        html: '<button id="go-2">Go</button>',
      },
    },
    // The test's selector changed since the run.
    { ...step('s3', '#old'), status: 'passed', healed: { from: '#old', to: '#new', score: 0.8 } },
    // A healed selector that held a secret value.
    { ...step('s4', '#y'), status: 'passed', healed: { from: '#y', to: 'text=[secret]', score: 0.7 } },
    // A step gone from the test.
    { ...step('s9', '#z'), status: 'passed', healed: { from: '#z', to: '#zz', score: 0.7 } },
  ],
  ...over,
});

beforeEach(() => {
  dynamo.reset();
  dynamo.on(GetCommand, { TableName: 't-runs' }).resolves({ Item: run() });
  dynamo.on(GetCommand, { TableName: 't-tests' }).resolves({ Item: test1 });
  dynamo.on(UpdateCommand).resolves({});
});

describe('planKeptHeals', () => {
  test('each healed step still recorded as healed becomes a change; the others are skipped saying why', async () => {
    const plan = await planKeptHeals('org1', 'r1');
    expect(plan.changes).toEqual([
      {
        step: 2,
        stepId: 's2',
        interaction: 'click',
        from: { selector: '#go', html: '<button id="go">Go</button>' },
        to: { selector: 'role=button[name="Go"]', html: '<button id="go-2">Go</button>' },
        score: 0.9,
      },
    ]);
    expect(plan.skipped).toEqual([
      { step: 3, stepId: 's3', reason: `the test's selector is "#x" now, not the one healed` },
      { step: 4, stepId: 's4', reason: 'the healed selector holds a secret value (masked): not kept' },
      { step: 5, stepId: 's9', reason: 'the step is no longer in the test' },
    ]);
    expect(plan.written).toBe(false);
    expect(dynamo.commandCalls(UpdateCommand)).toHaveLength(0);
  });

  test("another organization's run is not found; a failed run's heals are not kept", async () => {
    await expect(planKeptHeals('org2', 'r1')).rejects.toThrow('run not found');
    dynamo.on(GetCommand, { TableName: 't-runs' }).resolves({ Item: run({ status: 'failed' }) });
    await expect(planKeptHeals('org1', 'r1')).rejects.toThrow('heals are kept only from a passed run');
  });
});

describe('keepHeals', () => {
  test('one conditional write: each step at its index, with its id and the selector that was healed', async () => {
    const plan = await keepHeals('org1', 'r1');
    expect(plan.written).toBe(true);
    const [call] = dynamo.commandCalls(UpdateCommand);
    expect(call!.args[0].input).toMatchObject({
      TableName: 't-tests',
      Key: { testId: 't1' },
      UpdateExpression: 'SET steps[1].#element = :el0',
      ConditionExpression: 'orgId = :org AND steps[1].id = :id0 AND steps[1].#element.selector = :from0',
      ExpressionAttributeValues: {
        ':org': 'org1',
        ':el0': { selector: 'role=button[name="Go"]', html: '<button id="go-2">Go</button>' },
        ':id0': 's2',
        ':from0': '#go',
      },
    });
  });

  test('a test changed meanwhile: a conflict, said so', async () => {
    dynamo
      .on(UpdateCommand)
      .rejects(Object.assign(new Error('failed'), { name: 'ConditionalCheckFailedException' }));
    await expect(keepHeals('org1', 'r1')).rejects.toThrow(
      'the test changed since it was read: nothing written; run tests heal again',
    );
  });
});
