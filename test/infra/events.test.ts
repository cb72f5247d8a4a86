import { describe, expect, test } from '@jest/globals';
import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { eventRules, type ScheduleDef, type ScheduleId, schedules } from '../../functions/manifest/events.js';
import { routes } from '../../functions/manifest/routes.js';
import type { TableName } from '../../functions/manifest/tables.js';
import type { WorkflowName } from '../../functions/manifest/workflows.js';
import { parseConfig } from '../../functions/shared/config.js';
import { publishActions, stateMachineArnEnv, tableWriteActions } from '../../lib/cdk/access.js';
import {
  ratePeriod,
  scheduleEventAge,
  scheduleRetries,
  scheduleTargetTimeout,
} from '../../lib/cdk/constructs/events.js';
import {
  asArray,
  cyclesOf,
  declaredFunctions,
  type Json,
  logicalIdOf,
  mentions,
  resourcesOf,
  statementsOf,
  synthesize,
} from './synth.js';

// Prepare: one synthesis with the defaults, one of another stage.
const { stateful, stateless, statelessTemplate: template } = synthesize();
const prod = synthesize({ stage: 'prod' });
const functions = resourcesOf(template, 'AWS::Lambda::Function');
const idIn = (construct: { node: { defaultChild?: unknown } }) => logicalIdOf(construct);
const busId = idIn(stateless.eventBus);
const githubSecretId = stateful.getLogicalId(stateful.githubAppSecret.node.defaultChild as never);
const declared = declaredFunctions(stateless);
const envOf = (id: string): Record<string, Json> => functions[id].Properties.Environment.Variables;
const outputValues = () =>
  Object.values(template.toJSON().Outputs as Record<string, Json>).map((o) => o.Value);
const scheduleIds = Object.keys(schedules) as ScheduleId[];
const sorted = (values: string[]) => [...values].sort();

describe('the service event bus', () => {
  const buses = resourcesOf(template, 'AWS::Events::EventBus');
  const bus = buses[busId];

  test('is the stack’s one bus, named after the stack (so one per stage), never a fixed name', () => {
    expect(Object.keys(buses)).toEqual([busId]);
    expect(bus.Properties.Name).toBe(`${stateless.stackName}-events`);
    expect(bus.Properties.Name).toBe('preview-dev-stateless-events');
    const [prodBus] = Object.values(resourcesOf(prod.statelessTemplate, 'AWS::Events::EventBus'));
    expect(prodBus.Properties.Name).toBe('preview-prod-stateless-events');
    expect(Object.keys(resourcesOf(prod.statefulTemplate, 'AWS::Events::EventBus'))).toEqual([]);
  });

  test('its resource policy lets only this account put events on it, and nothing widens it', () => {
    const statements = asArray<Json>(bus.Properties.Policy.Statement);
    expect(statements).toEqual([
      {
        Sid: 'OwnAccountOnly',
        Effect: 'Allow',
        Action: 'events:PutEvents',
        Principal: {
          AWS: {
            'Fn::Join': [
              '',
              ['arn:', { Ref: 'AWS::Partition' }, ':iam::', { Ref: 'AWS::AccountId' }, ':root'],
            ],
          },
        },
        Resource: {
          'Fn::Join': [
            '',
            [
              'arn:',
              { Ref: 'AWS::Partition' },
              ':events:',
              { Ref: 'AWS::Region' },
              ':',
              { Ref: 'AWS::AccountId' },
              ':event-bus/preview-dev-stateless-events',
            ],
          ],
        },
      },
    ]);
    // No separate policy resource could add another account, an organization or a service.
    expect(resourcesOf(template, 'AWS::Events::EventBusPolicy')).toEqual({});
    expect(JSON.stringify(bus.Properties.Policy)).not.toMatch(/"\*"|aws:PrincipalOrgID|Service/);
  });

  test('outputs its name and ARN (where other systems of the account put custom events)', () => {
    expect(outputValues()).toContainEqual({ Ref: busId });
    expect(outputValues()).toContainEqual({ 'Fn::GetAtt': [busId, 'Arn'] });
  });
});

describe('publishing on the service bus', () => {
  test('the GitHub webhook route publishes (GitHub deliveries become events on the bus)', () => {
    expect(declared.filter(([, fn]) => fn.access.publishes).map(([label]) => label)).toContain(
      'route githubWebhook',
    );
  });

  test.each(declared)('%s may put events, on that bus only, exactly when it declares publishes', (_, fn) => {
    const statements = statementsOf(template, fn.id)
      .filter((s) => s.actions.some((a) => a.startsWith('events:')))
      .map((s) => ({ actions: sorted(s.actions), resources: s.resources }));
    if (fn.access.publishes) {
      expect(statements).toEqual([
        { actions: publishActions, resources: [{ 'Fn::GetAtt': [busId, 'Arn'] }] },
      ]);
      expect(envOf(fn.id).EVENT_BUS_NAME).toEqual({ Ref: busId });
    } else {
      expect(statements).toEqual([]);
      expect(envOf(fn.id).EVENT_BUS_NAME).toBeUndefined();
    }
  });

  test('the bus name reaches config.ts as events.busName', () => {
    const fn = declared.find(([label]) => label === 'route githubWebhook')![1];
    const env = Object.fromEntries(
      Object.entries(envOf(fn.id)).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved:${k}`]),
    );
    expect(parseConfig({ ...env, AWS_REGION: 'eu-west-1' }).events.busName).toBe('resolved:EVENT_BUS_NAME');
  });
});

describe('the GitHub webhook route', () => {
  const [, webhook] = declared.find(([label]) => label === 'route githubWebhook')!;

  test('is authenticated by its signature: it reads the GitHub App secret (its webhookSecret)', () => {
    expect(routes.githubWebhook.auth).toBe('githubWebhook');
    const reads = statementsOf(template, webhook.id).filter((s) =>
      s.resources.some((r) => mentions(r, githubSecretId)),
    );
    expect(reads.map((s) => sorted(s.actions))).toEqual([
      ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'],
    ]);
    expect(mentions(envOf(webhook.id).GITHUB_APP_SECRET_ARN, githubSecretId)).toBe(true);
    expect(envOf(webhook.id).GITHUB_API_URL).toBe('https://api.github.com');
  });

  test('POSTs on its path with no API Gateway authorizer (GitHub signs, it holds no API key)', () => {
    const methods = Object.values(resourcesOf(template, 'AWS::ApiGateway::Method')).filter((m) =>
      mentions(m.Properties.Integration?.Uri, webhook.id),
    );
    expect(methods.map((m) => [m.Properties.HttpMethod, m.Properties.AuthorizationType])).toEqual([
      ['POST', 'NONE'],
    ]);
  });

  test('records deliveries (RW) and never writes applications', () => {
    const writesTo = (table: TableName) => {
      const tableId = stateful.getLogicalId(stateful.tables[table].node.defaultChild as dynamodb.CfnTable);
      return statementsOf(template, webhook.id)
        .filter((s) => s.resources.some((r) => mentions(r, tableId)))
        .some((s) => s.actions.some((a) => tableWriteActions.includes(a)));
    };
    expect(writesTo('deliveries')).toBe(true);
    expect(writesTo('applications')).toBe(false);
  });
});

describe('rules of the service bus', () => {
  const rules = resourcesOf(template, 'AWS::Events::Rule');
  const serviceRules = (Object.keys(eventRules) as (keyof typeof eventRules)[]).filter(
    (r) => eventRules[r].bus === 'service',
  );

  test('every service-bus rule of the manifest is on the bus, every other rule on the default bus', () => {
    expect(serviceRules.length).toBeGreaterThan(0);
    const onBus = Object.entries(rules)
      .filter(([, r]) => r.Properties.EventBusName !== undefined)
      .map(([id]) => id);
    expect(sorted(onBus)).toEqual(sorted(serviceRules.map((r) => idIn(stateless.eventRules[r].rule))));
    for (const id of onBus) expect(rules[id].Properties.EventBusName).toEqual({ Ref: busId });
  });

  test.each(serviceRules)('%s: its target may start exactly the workflows it declares', (ruleId) => {
    const fnId = idIn(stateless.eventRules[ruleId].function);
    const starts = (eventRules[ruleId].target.access.starts ?? []) as WorkflowName[];
    for (const workflow of Object.keys(stateless.stateMachines) as WorkflowName[]) {
      const machineId = idIn(stateless.stateMachines[workflow]);
      const grants = statementsOf(template, fnId).filter(
        (s) => s.actions.includes('states:StartExecution') && s.resources.some((r) => mentions(r, machineId)),
      );
      expect(grants.length > 0).toBe(starts.includes(workflow));
      expect(envOf(fnId)[stateMachineArnEnv[workflow]]).toEqual(
        starts.includes(workflow) ? { Ref: machineId } : undefined,
      );
    }
  });
});

describe.each(scheduleIds)('the %s schedule', (scheduleId) => {
  const def: ScheduleDef = schedules[scheduleId];
  const built = stateless.schedules[scheduleId];
  const ruleId = idIn(built.rule);
  const fnId = idIn(built.function);
  const deliveryId = idIn(built.deliveryDlq);
  const failureId = idIn(built.failureDlq);
  const rule = resourcesOf(template, 'AWS::Events::Rule')[ruleId].Properties;
  const age = scheduleEventAge(def).toSeconds();
  const period = ratePeriod(def.schedule);

  test('is a scheduled rule (default bus) with the manifest’s expression, and no event pattern', () => {
    expect(rule.ScheduleExpression).toBe(def.schedule);
    expect(rule.EventBusName).toBeUndefined();
    expect(rule.EventPattern).toBeUndefined();
    expect(rule.State).toBe('ENABLED');
    expect(rule.Description).toBe(def.description);
  });

  test('its target retries delivery within one period, then sends the event to its delivery DLQ', () => {
    expect(rule.Targets).toEqual([
      expect.objectContaining({
        Arn: { 'Fn::GetAtt': [fnId, 'Arn'] },
        RetryPolicy: { MaximumRetryAttempts: scheduleRetries.delivery, MaximumEventAgeInSeconds: age },
        DeadLetterConfig: { Arn: { 'Fn::GetAtt': [deliveryId, 'Arn'] } },
      }),
    ]);
    if (period) expect(age).toBeLessThanOrEqual(period.toSeconds());
    // Only this rule may invoke the function, and only this rule may send to the delivery DLQ.
    const permissions = Object.values(resourcesOf(template, 'AWS::Lambda::Permission')).filter((p) =>
      mentions(p.Properties.FunctionName, fnId),
    );
    expect(permissions.map((p) => p.Properties)).toEqual([
      expect.objectContaining({
        Action: 'lambda:InvokeFunction',
        Principal: 'events.amazonaws.com',
        SourceArn: { 'Fn::GetAtt': [ruleId, 'Arn'] },
      }),
    ]);
    const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
      asArray<Json>(p.Properties.Queues).some((q) => q.Ref === deliveryId),
    );
    expect(
      asArray<Json>(policy?.Properties.PolicyDocument.Statement).filter((s) => s.Effect === 'Allow'),
    ).toEqual([
      expect.objectContaining({
        Action: 'sqs:SendMessage',
        Principal: { Service: 'events.amazonaws.com' },
        Condition: { ArnEquals: { 'aws:SourceArn': { 'Fn::GetAtt': [ruleId, 'Arn'] } } },
      }),
    ]);
  });

  test('its function retries twice (asynchronous invocation), then sends the event to its on-failure queue', () => {
    const configs = Object.values(resourcesOf(template, 'AWS::Lambda::EventInvokeConfig')).filter(
      (c) => c.Properties.FunctionName.Ref === fnId,
    );
    expect(configs.map((c) => c.Properties)).toEqual([
      {
        FunctionName: { Ref: fnId },
        Qualifier: '$LATEST',
        MaximumRetryAttempts: scheduleRetries.invocation,
        MaximumEventAgeInSeconds: age,
        DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [failureId, 'Arn'] } } },
      },
    ]);
    expect(scheduleRetries.invocation).toBe(2);
    const sends = statementsOf(template, fnId).filter((s) => s.actions.some((a) => a.startsWith('sqs:')));
    expect(sends.map((s) => s.resources)).toEqual([[{ 'Fn::GetAtt': [failureId, 'Arn'] }]]);
  });

  test('both queues are distinct, encrypted, TLS only, kept 14 days, and output', () => {
    const queues = resourcesOf(template, 'AWS::SQS::Queue');
    expect(deliveryId).not.toBe(failureId);
    for (const id of [deliveryId, failureId]) {
      expect(queues[id].Properties).toEqual(
        expect.objectContaining({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 }),
      );
      const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
        asArray<Json>(p.Properties.Queues).some((q) => q.Ref === id),
      );
      expect(asArray<Json>(policy?.Properties.PolicyDocument.Statement)).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
      expect(outputValues()).toContainEqual({ Ref: id });
    }
    expect(outputValues()).toContainEqual({ Ref: ruleId });
  });

  test('its function is tagged, ends well within the period, and is granted what the entry declares', () => {
    const fn = functions[fnId];
    expect(asArray<Json>(fn.Properties.Tags)).toContainEqual({ Key: 'preview:schedule', Value: scheduleId });
    expect(fn.Properties.Timeout).toBe(scheduleTargetTimeout.toSeconds());
    if (period) expect(fn.Properties.Timeout).toBeLessThan(period.toSeconds());
    const access = def.target.access;
    for (const [table, mode] of Object.entries(access.tables) as [TableName, 'R' | 'RW'][]) {
      const tableId = stateful.getLogicalId(stateful.tables[table].node.defaultChild as dynamodb.CfnTable);
      const actions = statementsOf(template, fnId)
        .filter((s) => s.resources.some((r) => mentions(r, tableId)))
        .flatMap((s) => s.actions);
      expect({ table, writes: actions.some((a) => tableWriteActions.includes(a)) }).toEqual({
        table,
        writes: mode === 'RW',
      });
    }
    for (const workflow of Object.keys(stateless.stateMachines) as WorkflowName[]) {
      const declares = (access.starts as readonly string[] | undefined)?.includes(workflow) ?? false;
      expect(envOf(fnId)[stateMachineArnEnv[workflow]]).toEqual(
        declares ? { Ref: idIn(stateless.stateMachines[workflow]) } : undefined,
      );
    }
    expect(mentions(envOf(fnId).GITHUB_APP_SECRET_ARN ?? null, githubSecretId)).toBe(
      Boolean(access.prStatus || access.sourceHost),
    );
  });
});

describe('schedule timing', () => {
  test.each([
    ['rate(15 minutes)', 900],
    ['rate(1 hour)', 3600],
    ['rate(2 days)', 172_800],
  ])('%s is a period of %d s', (expression, seconds) => {
    expect(ratePeriod(expression)?.toSeconds()).toBe(seconds);
  });

  test('a scheduled event is worth delivering for one period: at least a minute, at most an hour', () => {
    const of = (schedule: string) =>
      scheduleEventAge({ ...schedules.expirySweep, schedule } as ScheduleDef).toSeconds();
    expect(of('rate(15 minutes)')).toBe(900);
    expect(of('rate(1 minute)')).toBe(60);
    expect(of('rate(1 day)')).toBe(3600);
    expect(of('cron(0 3 * * ? *)')).toBe(3600);
    expect(() => ratePeriod('every 5 minutes')).toThrow(/neither rate/);
    expect(scheduleTargetTimeout.toSeconds()).toBeLessThan(Duration.minutes(15).toSeconds());
  });
});

describe('template', () => {
  test('the other stage has no dependency cycle either (bus, rules, schedules, publishers)', () => {
    expect(cyclesOf(prod.statelessTemplate)).toEqual([]);
  });
});

describe('the runSweep schedule (runs left pending or running in AWS)', () => {
  const built = stateless.schedules.runSweep;
  const fnId = idIn(built.function);
  const statements = statementsOf(template, fnId);
  const actions = statements.flatMap((s) => s.actions);
  const tableIdOf = (name: TableName) =>
    stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);

  test('runs every 10 minutes the run-sweep handler, and locally never (the server recovers at start)', () => {
    expect(schedules.runSweep.schedule).toBe('rate(10 minutes)');
    expect(schedules.runSweep.target.entry).toBe('functions/events/run-sweep.ts');
    expect(declared.map(([, d]) => d.id)).toContain(fnId);
  });

  test('is granted least privilege: runs RW, tenancy RW (the merge gate), environments R, the secrets read, media read (the gate links); no start', () => {
    const touched = (Object.keys(stateful.tables) as TableName[]).filter((name) =>
      statements.some((s) => s.resources.some((r) => mentions(r, tableIdOf(name)))),
    );
    expect(sorted(touched)).toEqual(['environments', 'runs', 'tenancy']);
    const writesOf = (name: TableName) =>
      statements
        .filter((s) => s.resources.some((r) => mentions(r, tableIdOf(name))))
        .flatMap((s) => s.actions)
        .filter((a) => tableWriteActions.includes(a));
    expect(writesOf('runs').length).toBeGreaterThan(0);
    // The merge gate's items (a swept run's check run completed) live in the tenancy table.
    expect(writesOf('tenancy').length).toBeGreaterThan(0);
    expect(writesOf('environments')).toEqual([]);
    expect(actions.filter((a) => a.startsWith('states:'))).toEqual([]);
    // No media: the merge gate's links (gateLinks) are report links, signed with the link key alone.
    expect(actions.filter((a) => a.startsWith('s3:'))).toEqual([]);
    expect(actions.filter((a) => a.startsWith('events:'))).toEqual([]);
    // The factory signing secret is read, never written.
    const secretActions = actions.filter((a) => a.startsWith('secretsmanager:'));
    expect(secretActions).toContain('secretsmanager:GetSecretValue');
    expect(secretActions.filter((a) => !/^secretsmanager:(GetSecretValue|DescribeSecret)$/.test(a))).toEqual(
      [],
    );
    // The GitHub App's secret: it completes the check run of a swept run's merge gate.
    expect(envOf(fnId).GITHUB_APP_SECRET_ARN).toBeDefined();
  });

  test('has its failure queue alarmed like every scheduled target', () => {
    const alarms = Object.values(resourcesOf(template, 'AWS::CloudWatch::Alarm'));
    const failureId = idIn(built.failureDlq);
    expect(
      alarms.filter((a) => JSON.stringify(a.Properties.Dimensions ?? []).includes(failureId)),
    ).toHaveLength(1);
  });
});

describe('the imageBuildFinished target (an image build reached a terminal state)', () => {
  const [, fn] = declared.find(([label]) => label === 'event target imageBuildFinished')!;
  const statements = statementsOf(template, fn.id);
  const tableIdOf = (name: TableName) =>
    stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
  const onTable = (name: TableName) =>
    statements.filter((s) => s.resources.some((r) => mentions(r, tableIdOf(name)))).flatMap((s) => s.actions);

  test("reads its apps' secret bundles to mask a failed build's output, and writes no secret", () => {
    const secretStatements = statements.filter((s) => s.actions.some((a) => a.startsWith('secretsmanager:')));
    expect(secretStatements.map((s) => sorted(s.actions))).toEqual([
      ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'],
    ]);
    // The stage's bundles only (`<secretNamePrefix>/*`), never the GitHub App's secret.
    expect(JSON.stringify(secretStatements[0]!.resources)).toContain(':secret:preview/');
    expect(secretStatements[0]!.resources.some((r) => mentions(r, githubSecretId))).toBe(false);
    expect(envOf(fn.id).SECRET_NAME_PREFIX).toBeDefined();
    // Which application holds them: applications read, never written; the bundles' items untouched.
    expect(onTable('applications').length).toBeGreaterThan(0);
    expect(onTable('applications').filter((a) => tableWriteActions.includes(a))).toEqual([]);
    expect(onTable('secretBundles')).toEqual([]);
    expect(onTable('environments').filter((a) => tableWriteActions.includes(a))).toEqual([]);
  });
});
