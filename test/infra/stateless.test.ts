import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { type RouteDef, type RouteId, routeIds, routes } from '../../functions/routes.js';
import { parseConfig } from '../../functions/shared/config.js';
import type { WorkflowName } from '../../functions/shared/ports.js';
import { type TableName, tableNames, tables } from '../../functions/shared/tables.js';
import { substitute, type TaskDef, workflows } from '../../functions/workflows.js';
import { stateMachineArnEnv } from '../../lib/cdk/api-function.js';
import { placeholders } from '../../lib/cdk/stateless-stack.js';
import { asArray, type Json, mentions, repoRoot, resourcesOf, statementsOf, synthesize } from './synth.js';

// Prepare: one synthesis for the whole file.
const { stateful, stateless, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const functions = resourcesOf(template, 'AWS::Lambda::Function');
const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
  stateless.getLogicalId(construct.node.defaultChild as never);
const tableLogicalId = (name: TableName) =>
  stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
const routeFunctionId = (id: RouteId) => logicalId(stateless.routeFunctions[id]);
const workflowNames = Object.keys(workflows) as WorkflowName[];
const stepEntries = [
  ...new Set(workflowNames.flatMap((w) => Object.values(workflows[w].tasks).map((t: TaskDef) => t.entry))),
];
const writeActions = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];
const tagValue = (fn: Json, key: string): string | undefined =>
  asArray<{ Key: string; Value: string }>(fn.Properties.Tags).find((t) => t.Key === key)?.Value;

/** Tables a function's policies reach, with whether any statement lets it write there. */
function tableAccess(functionId: string): Partial<Record<TableName, 'R' | 'RW'>> {
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

const actionsOf = (functionId: string) => statementsOf(template, functionId).flatMap((s) => s.actions);

/** Full path of an API Gateway resource, from its logical id (or the root). */
function resourcePath(ref: Json): string {
  if (ref['Fn::GetAtt']?.[1] === 'RootResourceId') return '';
  const resource = resources[ref.Ref];
  return `${resourcePath(resource.Properties.ParentId)}/${resource.Properties.PathPart}`;
}

describe('functions', () => {
  test('one function per route and one per unique step entry, nothing else', () => {
    const byRoute = Object.values(functions).map((fn) => tagValue(fn, 'preview:route'));
    const bySteps = Object.values(functions).map((fn) => tagValue(fn, 'preview:step'));
    expect(byRoute.filter(Boolean).sort()).toEqual([...routeIds].sort());
    expect(bySteps.filter(Boolean).sort()).toEqual([...stepEntries].sort());
    expect(Object.keys(functions)).toHaveLength(routeIds.length + stepEntries.length);
  });

  test.each(Object.keys(functions))(
    '%s runs Node.js >= 22 on arm64 with tracing and a retained log',
    (id) => {
      const props = functions[id].Properties;
      expect(props.Runtime).toMatch(/^nodejs\d+\.x$/);
      expect(Number(/^nodejs(\d+)/.exec(props.Runtime)?.[1])).toBeGreaterThanOrEqual(22);
      expect(props.Architectures).toEqual(['arm64']);
      expect(props.TracingConfig).toEqual({ Mode: 'Active' });
      expect(props.MemorySize).toBe(512);
      expect(props.Handler).toBe('index.handler');
      expect(props.FunctionName).toBeUndefined();
      const logGroup = resources[props.LoggingConfig.LogGroup.Ref];
      expect(logGroup.Type).toBe('AWS::Logs::LogGroup');
      expect(logGroup.Properties.RetentionInDays).toBe(30);
      const timeout = tagValue(functions[id], 'preview:route') ? 29 : 900;
      expect(props.Timeout).toBeLessThanOrEqual(timeout);
    },
  );

  test.each(Object.keys(functions))('%s has the environment config.ts validates', (id) => {
    // Prepare: deploy-time references become placeholder strings; Lambda sets AWS_REGION.
    const variables = functions[id].Properties.Environment.Variables as Record<string, Json>;
    const env = Object.fromEntries(
      Object.entries(variables).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved:${k}`]),
    );
    // Act
    const config = parseConfig({ ...env, AWS_REGION: 'eu-west-1' });
    // Assess
    expect(config.mode).toBe('aws');
    expect(config.secretNamePrefix).toBe('preview/dev');
    expect(env.NODE_OPTIONS).toBe('--enable-source-maps');
    for (const name of tableNames) {
      expect(mentions(variables[tables[name].envVar], tableLogicalId(name))).toBe(true);
    }
  });
});

describe('routes', () => {
  const methods = Object.values(resourcesOf(template, 'AWS::ApiGateway::Method'));

  test('the API has exactly the methods of the route manifest', () => {
    const actual = methods.map((m) => `${m.Properties.HttpMethod} ${resourcePath(m.Properties.ResourceId)}`);
    const expected = routeIds.map((id) => `${routes[id].method} ${routes[id].path}`);
    expect(actual.sort()).toEqual(expected.sort());
  });

  test.each(routeIds)('%s is wired to its own function without an API Gateway authorizer', (id) => {
    const route: RouteDef = routes[id];
    const method = methods.find(
      (m) => m.Properties.HttpMethod === route.method && resourcePath(m.Properties.ResourceId) === route.path,
    );
    expect(method).toBeDefined();
    expect(method.Properties.AuthorizationType).toBe('NONE');
    expect(method.Properties.Integration.Type).toBe('AWS_PROXY');
    expect(method.Properties.Integration.IntegrationHttpMethod).toBe('POST');
    expect(mentions(method.Properties.Integration.Uri, routeFunctionId(id))).toBe(true);
    expect(functions[routeFunctionId(id)].Properties.Description).toBe(`${route.method} ${route.path}`);
  });

  test.each(routeIds)('%s reaches exactly the tables it declares (tenancy read for authentication)', (id) => {
    const route: RouteDef = routes[id];
    const expected: Partial<Record<TableName, 'R' | 'RW'>> = { tenancy: 'R', ...route.access.tables };
    expect(tableAccess(routeFunctionId(id))).toEqual(expected);
  });

  test.each(routeIds)('%s may start exactly the workflows it declares', (id) => {
    const route: RouteDef = routes[id];
    const fnId = routeFunctionId(id);
    const variables = functions[fnId].Properties.Environment.Variables;
    const starts = statementsOf(template, fnId).filter((s) => s.actions.includes('states:StartExecution'));
    const started = workflowNames.filter((w) =>
      starts.some((s) => s.resources.some((r) => mentions(r, logicalId(stateless.stateMachines[w])))),
    );
    expect(started).toEqual(workflowNames.filter((w) => route.access.starts?.includes(w)));
    for (const workflow of workflowNames) {
      const expected = route.access.starts?.includes(workflow)
        ? { Ref: logicalId(stateless.stateMachines[workflow]) }
        : undefined;
      expect(variables[stateMachineArnEnv[workflow]]).toEqual(expected);
    }
    // Nothing beyond starting: no stop, no describe, no wildcard.
    expect(actionsOf(fnId).filter((a) => a.startsWith('states:'))).toEqual(
      route.access.starts?.length ? ['states:StartExecution'] : [],
    );
  });

  test('getEnvironment cannot write the environments table', () => {
    const envId = tableLogicalId('environments');
    for (const statement of statementsOf(template, routeFunctionId('getEnvironment'))) {
      if (!statement.resources.some((r) => mentions(r, envId))) continue;
      expect(statement.actions.filter((a) => writeActions.includes(a))).toEqual([]);
    }
    expect(tableAccess(routeFunctionId('getEnvironment')).environments).toBe('R');
  });

  test('listRuns cannot touch secret bundles, their metadata or any secret', () => {
    const fnId = routeFunctionId('listRuns');
    expect(tableAccess(fnId).secretBundles).toBeUndefined();
    expect(actionsOf(fnId).filter((a) => a.startsWith('secretsmanager:'))).toEqual([]);
  });

  test('only routes that declare secrets get Secrets Manager, and only under the stage prefix', () => {
    for (const id of routeIds) {
      const route: RouteDef = routes[id];
      const statements = statementsOf(template, routeFunctionId(id)).filter((s) =>
        s.actions.some((a) => a.startsWith('secretsmanager:')),
      );
      if (!route.access.secrets) {
        expect(statements).toEqual([]);
        continue;
      }
      expect(statements).toHaveLength(1);
      expect(statements[0]?.actions.sort()).toEqual([
        'secretsmanager:CreateSecret',
        'secretsmanager:DescribeSecret',
        'secretsmanager:GetSecretValue',
        'secretsmanager:PutSecretValue',
        'secretsmanager:TagResource',
      ]);
      const resource = JSON.stringify(statements[0]?.resources);
      expect(resource).toContain(':secret:preview/dev/*');
      for (const pseudo of ['AWS::Partition', 'AWS::Region', 'AWS::AccountId'])
        expect(resource).toContain(pseudo);
    }
  });
});

describe('workflows', () => {
  const machines = resourcesOf(template, 'AWS::StepFunctions::StateMachine');

  test('one standard, traced state machine per workflow', () => {
    expect(Object.keys(machines).sort()).toEqual(
      workflowNames.map((w) => logicalId(stateless.stateMachines[w])).sort(),
    );
    for (const machine of Object.values(machines)) {
      expect(machine.Properties.StateMachineType).toBe('STANDARD');
      expect(machine.Properties.TracingConfiguration).toEqual({ Enabled: true });
      expect(machine.Properties.StateMachineName).toBeUndefined();
    }
  });

  test.each(workflowNames)('%s logs to its own log group without execution data', (name) => {
    const logging = machines[logicalId(stateless.stateMachines[name])].Properties.LoggingConfiguration;
    expect(logging.IncludeExecutionData).toBe(false);
    expect(['ALL', 'ERROR']).toContain(logging.Level);
    const logGroup = resources[logging.Destinations[0].CloudWatchLogsLogGroup.LogGroupArn['Fn::GetAtt'][0]];
    expect(logGroup.Properties.RetentionInDays).toBe(30);
  });

  test.each(workflowNames)('%s substitutes every placeholder with its step function ARN', (name) => {
    // Prepare
    const workflow = workflows[name];
    const asl = readFileSync(join(repoRoot, workflow.definition), 'utf8');
    const machine = machines[logicalId(stateless.stateMachines[name])].Properties;
    const tasks = workflow.tasks as Record<string, TaskDef>;
    // Act
    const rendered = substitute(
      asl,
      Object.fromEntries(
        Object.entries(machine.DefinitionSubstitutions).map(([k, v]) => [
          k,
          `arn-of:${(v as Json)['Fn::GetAtt'][0]}`,
        ]),
      ),
    );
    // Assess
    expect(machine.DefinitionS3Location).toBeDefined();
    expect(Object.keys(machine.DefinitionSubstitutions).sort()).toEqual(placeholders(asl).sort());
    expect(rendered).not.toMatch(/\$\{/);
    for (const [placeholder, task] of Object.entries(tasks)) {
      const stepId = logicalId(stateless.stepFunctions.get(task.entry)!);
      expect(machine.DefinitionSubstitutions[placeholder]).toEqual({ 'Fn::GetAtt': [stepId, 'Arn'] });
    }
  });

  test.each(workflowNames)('%s may invoke its step functions and nothing else', (name) => {
    const machine = stateless.stateMachines[name] as sfn.StateMachine;
    const roleId = stateless.getLogicalId(machine.role.node.defaultChild as never);
    const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).filter((p) =>
      asArray<Json>(p.Properties.Roles).some((r) => r.Ref === roleId),
    );
    const invokes = policies
      .flatMap((p) => asArray<Json>(p.Properties.PolicyDocument.Statement))
      .filter((s) => asArray<string>(s.Action).includes('lambda:InvokeFunction'));
    const invokable = [...stateless.stepFunctions.values()]
      .map(logicalId)
      .filter((id) => invokes.some((s) => mentions(s.Resource, id)));
    const expected = [...new Set(Object.values(workflows[name].tasks).map((t: TaskDef) => t.entry))].map(
      (e) => logicalId(stateless.stepFunctions.get(e)!),
    );
    expect(invokable.sort()).toEqual(expected.sort());
    expect(Object.values(stateless.routeFunctions).some((fn) => mentions(invokes, logicalId(fn)))).toBe(
      false,
    );
  });

  test.each(stepEntries)(
    'step %s reaches exactly its declared tables (no tenancy) and stops before its state times out',
    (entry) => {
      const fnId = logicalId(stateless.stepFunctions.get(entry)!);
      const declared = workflowNames.flatMap((w) =>
        Object.values(workflows[w].tasks as Record<string, TaskDef>).filter((t) => t.entry === entry),
      );
      const expected: Partial<Record<TableName, 'R' | 'RW'>> = {};
      for (const task of declared) {
        for (const [table, mode] of Object.entries(task.access.tables) as [TableName, 'R' | 'RW'][]) {
          if (expected[table] !== 'RW') expected[table] = mode;
        }
      }
      expect(tableAccess(fnId)).toEqual(expected);
      const secrets = declared.some((t) => t.access.secrets);
      expect(actionsOf(fnId).some((a) => a.startsWith('secretsmanager:'))).toBe(secrets);
      expect(actionsOf(fnId).some((a) => a.startsWith('states:'))).toBe(false);
      // The state's TimeoutSeconds must not fire while the Lambda still runs.
      const timeouts = workflowNames.flatMap((w) => {
        const asl = JSON.parse(readFileSync(join(repoRoot, workflows[w].definition), 'utf8'));
        const tasks = workflows[w].tasks as Record<string, TaskDef>;
        return Object.values(asl.States as Record<string, Json>)
          .filter((s) => tasks[/^\$\{(\w+)\}$/.exec(s.Resource ?? '')?.[1] ?? '']?.entry === entry)
          .map((s) => s.TimeoutSeconds as number);
      });
      expect(timeouts.length).toBeGreaterThan(0);
      expect(functions[fnId].Properties.Timeout).toBeLessThan(Math.min(...timeouts));
    },
  );
});

describe('REST API', () => {
  const responses = Object.values(resourcesOf(template, 'AWS::ApiGateway::GatewayResponse'));
  const responseOf = (type: string) => responses.find((r) => r.Properties.ResponseType === type)?.Properties;

  test('an unknown route answers 404 with the service error shape', () => {
    const notFound = responseOf('MISSING_AUTHENTICATION_TOKEN');
    expect(notFound.StatusCode).toBe('404');
    expect(JSON.parse(notFound.ResponseTemplates['application/json'])).toEqual({ error: 'route not found' });
    expect(notFound.ResponseParameters['gatewayresponse.header.Content-Type']).toBe("'application/json'");
  });

  test.each(['DEFAULT_4XX', 'DEFAULT_5XX'])('%s answers {"error": message} as JSON', (type) => {
    const response = responseOf(type);
    const body: string = response.ResponseTemplates['application/json'];
    // messageString is substituted already quoted: the template is JSON once it is.
    expect(JSON.parse(body.replace('$context.error.messageString', '"Forbidden"'))).toEqual({
      error: 'Forbidden',
    });
    expect(response.ResponseParameters['gatewayresponse.header.Content-Type']).toBe("'application/json'");
  });

  test('the stage throttles, traces and keeps access logs without bodies or headers', () => {
    const [stage] = Object.values(resourcesOf(template, 'AWS::ApiGateway::Stage'));
    const props = stage.Properties;
    expect(props.TracingEnabled).toBe(true);
    expect(props.MethodSettings).toEqual([
      expect.objectContaining({
        HttpMethod: '*',
        ResourcePath: '/*',
        DataTraceEnabled: false,
        LoggingLevel: 'OFF',
        ThrottlingRateLimit: expect.any(Number),
        ThrottlingBurstLimit: expect.any(Number),
      }),
    ]);
    const format: string = props.AccessLogSetting.Format;
    expect(JSON.parse(format.replace('$context.error.messageString', '"x"'))).toHaveProperty('status');
    expect(format).not.toMatch(/body|header|authorization|\$input/i);
  });

  test('outputs the API URL, every table name and every state machine ARN', () => {
    const outputs = template.toJSON().Outputs as Record<string, Json>;
    const values = Object.values(outputs).map((o) => o.Value);
    expect(Object.keys(outputs).some((k) => k.startsWith('ApiUrl'))).toBe(true);
    for (const name of tableNames) expect(values.some((v) => mentions(v, tableLogicalId(name)))).toBe(true);
    for (const name of workflowNames) {
      expect(values).toContainEqual({ Ref: logicalId(stateless.stateMachines[name]) });
    }
  });
});
