import { expect } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { type TableName, tableNames } from '../../functions/manifest/tables.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import {
  grantsOf,
  type Json,
  logicalIdOf,
  mentions,
  resourcesOf,
  statementsOf,
  synthesize,
} from './synth.js';

/**
 * The stateless stack as its tests read it (stateless*.test.ts): one synthesis, the logical ids of its
 * functions, tables and workflows, and what a function's policies let it do to tables, secrets and
 * state machines.
 */
const synthesized = synthesize();
const { stateful } = synthesized;
export const { stateless, statelessTemplate: template } = synthesized;
export const resources = template.toJSON().Resources as Record<string, Json>;
export const functions = resourcesOf(template, 'AWS::Lambda::Function');
export const logicalId = (construct: { node: { defaultChild?: unknown } }) => logicalIdOf(construct);
export const tableLogicalId = (name: TableName) =>
  stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
export const workflowNames = Object.keys(workflows) as WorkflowName[];
const githubSecretId = stateful.getLogicalId(stateful.githubAppSecret.node.defaultChild as never);
export const linkSecretId = logicalId(stateless.runLinkSecret);
export const stepEntries = [
  ...new Set(workflowNames.flatMap((w) => Object.values(workflows[w].tasks).map((t: TaskDef) => t.entry))),
];
export const writeActions = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];

/** Tables a function's policies reach, with whether any statement lets it write there. */
export function tableAccess(functionId: string): Partial<Record<TableName, 'R' | 'RW'>> {
  const access: Partial<Record<TableName, 'R' | 'RW'>> = {};
  for (const statement of statementsOf(template, functionId)) {
    for (const name of tableNames) {
      if (!statement.resources.some((r) => mentions(r, tableLogicalId(name)))) continue;
      const writes = statement.actions.some((a) => writeActions.includes(a) || a === 'dynamodb:*');
      access[name] = writes || access[name] === 'RW' ? 'RW' : 'R';
    }
  }
  return access;
}

export const actionsOf = (functionId: string) => statementsOf(template, functionId).flatMap((s) => s.actions);

export const secretReadActions = ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'];
export const secretWriteActions = [
  'secretsmanager:CreateSecret',
  'secretsmanager:PutSecretValue',
  'secretsmanager:TagResource',
  'secretsmanager:RestoreSecret',
];
export const taskResponseActions = [
  'states:SendTaskFailure',
  'states:SendTaskHeartbeat',
  'states:SendTaskSuccess',
];

/**
 * A function reaches secret bundles exactly as declared: not at all, read-only or read-write, under the
 * prefix. (The GitHub App secret, a single secret of the stateful stack, is checked in cloud-path.test.ts,
 * the run-link secret in test-runs.test.ts; together the tests leave no other Secrets Manager statement.)
 */
export function expectSecrets(functionId: string, mode: 'R' | 'RW' | undefined): void {
  const statements = grantsOf(template, functionId).filter(
    (s) =>
      s.actions.some((a) => a.startsWith('secretsmanager:')) &&
      !s.resources.some((r) => mentions(r, githubSecretId) || mentions(r, linkSecretId)),
  );
  if (!mode) {
    expect(statements).toEqual([]);
    return;
  }
  expect(statements).toHaveLength(1);
  expect([...(statements[0]?.actions ?? [])].sort()).toEqual(
    (mode === 'RW' ? [...secretReadActions, ...secretWriteActions] : secretReadActions).sort(),
  );
  const resource = JSON.stringify(statements[0]?.resources);
  expect(resource).toContain(':secret:preview/dev/*');
  for (const pseudo of ['AWS::Partition', 'AWS::Region', 'AWS::AccountId'])
    expect(resource).toContain(pseudo);
}
