import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { eventRules, schedules } from '../../functions/manifest/events.js';
import type { TableName } from '../../functions/manifest/tables.js';
import { workers } from '../../functions/manifest/workers.js';
import { tableWriteActions } from '../../lib/cdk/access.js';
import { eventDelivery, eventInvocation } from '../../lib/cdk/constructs/events.js';
import {
  busId,
  functions,
  projectId,
  ruleIds,
  sorted,
  stateful,
  stateless,
  statementsAbout,
  template,
} from './cloud-path-stack.js';
import { asArray, type Json, logicalIdOf, mentions, resourcesOf, statementsOf } from './synth.js';

// The cloud path's event rules: pattern, target, retries and dead-letter queues of each.

describe('event rules', () => {
  const rules = resourcesOf(template, 'AWS::Events::Rule');
  const queues = resourcesOf(template, 'AWS::SQS::Queue');

  test('one rule per manifest entry and schedule; the only queues are two per rule and schedule, one per worker', () => {
    expect(sorted(Object.keys(rules))).toEqual(
      sorted([
        ...ruleIds.map((r) => logicalIdOf(stateless.eventRules[r].rule)),
        ...Object.values(stateless.schedules).map((s) => logicalIdOf(s.rule)),
      ]),
    );
    expect(Object.keys(queues)).toHaveLength(
      2 * ruleIds.length + 2 * Object.keys(schedules).length + Object.keys(workers).length,
    );
  });

  describe.each(ruleIds)('%s', (ruleId) => {
    const built = stateless.eventRules[ruleId];
    const def = eventRules[ruleId];
    const ruleId_ = logicalIdOf(built.rule);
    const fnId = logicalIdOf(built.function);
    const deliveryId = logicalIdOf(built.deliveryDlq);
    const failureId = logicalIdOf(built.failureDlq);
    const rule = rules[ruleId_].Properties;

    test(`matches the manifest pattern on the ${def.bus} bus (narrowed to the stack’s own build project where declared)`, () => {
      // The default bus for AWS service events; the service's own bus for GitHub and custom events.
      if (def.bus === 'service') expect(rule.EventBusName).toEqual({ Ref: busId });
      else expect(rule.EventBusName).toBeUndefined();
      expect(rule.State).toBe('ENABLED');
      const detail = {
        ...def.pattern.detail,
        ...(def.ownImageBuildProject ? { 'project-name': [{ Ref: projectId }] } : {}),
      };
      expect(rule.EventPattern).toEqual({
        source: def.pattern.source,
        'detail-type': def.pattern['detail-type'],
        ...(Object.keys(detail).length > 0 ? { detail } : {}),
      });
    });

    test('targets its function with a retry policy and a dead-letter queue for failed deliveries', () => {
      expect(rule.Targets).toEqual([
        expect.objectContaining({
          Arn: { 'Fn::GetAtt': [fnId, 'Arn'] },
          RetryPolicy: {
            MaximumRetryAttempts: eventDelivery.retryAttempts,
            MaximumEventAgeInSeconds: eventDelivery.maxEventAge.toSeconds(),
          },
          DeadLetterConfig: { Arn: { 'Fn::GetAtt': [deliveryId, 'Arn'] } },
        }),
      ]);
      const permissions = Object.values(resourcesOf(template, 'AWS::Lambda::Permission')).filter((p) =>
        mentions(p.Properties.FunctionName, fnId),
      );
      expect(permissions.map((p) => p.Properties)).toEqual([
        expect.objectContaining({
          Action: 'lambda:InvokeFunction',
          Principal: 'events.amazonaws.com',
          SourceArn: { 'Fn::GetAtt': [ruleId_, 'Arn'] },
        }),
      ]);
      // Only this rule may send to the delivery DLQ (and only over TLS).
      const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
        asArray<Json>(p.Properties.Queues).some((q) => q.Ref === deliveryId),
      );
      const statements = asArray<Json>(policy?.Properties.PolicyDocument.Statement);
      expect(statements.filter((s) => s.Effect === 'Allow')).toEqual([
        expect.objectContaining({
          Action: 'sqs:SendMessage',
          Principal: { Service: 'events.amazonaws.com' },
          Condition: { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [ruleId_, 'Arn'] } } },
        }),
      ]);
    });

    test('its function retries twice, then sends a failed event to its on-failure queue', () => {
      const configs = Object.values(resourcesOf(template, 'AWS::Lambda::EventInvokeConfig')).filter(
        (c) => c.Properties.FunctionName.Ref === fnId,
      );
      expect(configs.map((c) => c.Properties)).toEqual([
        {
          FunctionName: { Ref: fnId },
          Qualifier: '$LATEST',
          MaximumRetryAttempts: eventInvocation.retryAttempts,
          MaximumEventAgeInSeconds: eventInvocation.maxEventAge.toSeconds(),
          DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [failureId, 'Arn'] } } },
        },
      ]);
      expect(eventInvocation.retryAttempts).toBe(2);
      const sends = statementsAbout(fnId, (s) => s.actions.some((a) => a.startsWith('sqs:')));
      expect(sends).toHaveLength(1);
      expect(sends[0]?.actions).toContain('sqs:SendMessage');
      expect(sends[0]?.resources).toEqual([{ 'Fn::GetAtt': [failureId, 'Arn'] }]);
    });

    test('both queues are distinct, encrypted, TLS-only and keep messages 14 days', () => {
      expect(deliveryId).not.toBe(failureId);
      for (const id of [deliveryId, failureId]) {
        expect(queues[id].Properties).toEqual(
          expect.objectContaining({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 }),
        );
        const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
          asArray<Json>(p.Properties.Queues).some((q) => q.Ref === id),
        );
        expect(asArray<Json>(policy?.Properties.PolicyDocument.Statement)).toContainEqual(
          expect.objectContaining({
            Effect: 'Deny',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
          }),
        );
      }
      const outputs = Object.values(template.toJSON().Outputs as Record<string, Json>).map((o) => o.Value);
      expect(outputs).toContainEqual({ Ref: deliveryId });
      expect(outputs).toContainEqual({ Ref: failureId });
    });

    test('its function runs for at most a minute and reaches its declared tables', () => {
      expect(functions[fnId].Properties.Timeout).toBe(60);
      const declaredTables = def.target.access.tables as Partial<Record<TableName, 'R' | 'RW'>>;
      for (const [name, mode] of Object.entries(declaredTables) as [TableName, 'R' | 'RW'][]) {
        const tableId = stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
        const actions = statementsOf(template, fnId)
          .filter((s) => s.resources.some((r) => mentions(r, tableId)))
          .flatMap((s) => s.actions);
        expect(actions.some((a) => tableWriteActions.includes(a))).toBe(mode === 'RW');
      }
    });
  });
});
