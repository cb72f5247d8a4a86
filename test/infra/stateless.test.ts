import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { eventRules, schedules } from '../../functions/manifest/events.js';
import {
  pages,
  type RouteAccess,
  type RouteDef,
  type RouteId,
  routeIds,
  routes,
} from '../../functions/manifest/routes.js';
import { type TableName, tableNames, tables } from '../../functions/manifest/tables.js';
import { workers } from '../../functions/manifest/workers.js';
import { substitute, type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { parseConfig } from '../../functions/shared/config.js';
import { stateMachineArnEnv } from '../../lib/cdk/access.js';
import { callbackStepSeconds, placeholders } from '../../lib/cdk/workflow-definitions.js';
import {
  asArray,
  clusterContext,
  cyclesOf,
  declaredFunctions,
  grantsOf,
  type Json,
  logicalIdOf,
  mentions,
  repoRoot,
  resourcesOf,
  statementsOf,
  synthesize,
} from './synth.js';

// Prepare: one synthesis for the whole file.
const { stateful, stateless, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const functions = resourcesOf(template, 'AWS::Lambda::Function');
const logicalId = (construct: { node: { defaultChild?: unknown } }) => logicalIdOf(construct);
const tableLogicalId = (name: TableName) =>
  stateful.getLogicalId(stateful.tables[name].node.defaultChild as dynamodb.CfnTable);
const routeFunctionId = (id: RouteId) => logicalId(stateless.routeFunctions[id]);
const workflowNames = Object.keys(workflows) as WorkflowName[];
const githubSecretId = stateful.getLogicalId(stateful.githubAppSecret.node.defaultChild as never);
const linkSecretId = logicalId(stateless.runLinkSecret);
const stepEntries = [
  ...new Set(workflowNames.flatMap((w) => Object.values(workflows[w].tasks).map((t: TaskDef) => t.entry))),
];
const writeActions = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];
/** The functions whose manifest entry declares `browser`. */
const declaredBrowser = new Set(
  declaredFunctions(stateless)
    .filter(([, fn]) => fn.access.browser)
    .map(([, fn]) => fn.id),
);
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

const secretReadActions = ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'];
const secretWriteActions = [
  'secretsmanager:CreateSecret',
  'secretsmanager:PutSecretValue',
  'secretsmanager:TagResource',
  'secretsmanager:RestoreSecret',
];
const taskResponseActions = ['states:SendTaskFailure', 'states:SendTaskHeartbeat', 'states:SendTaskSuccess'];

/**
 * A function reaches secret bundles exactly as declared: not at all, read-only or read-write, under the
 * prefix. (The GitHub App secret, a single secret of the stateful stack, is checked in cloud-path.test.ts,
 * the run-link secret in test-runs.test.ts; together the tests leave no other Secrets Manager statement.)
 */
function expectSecrets(functionId: string, mode: 'R' | 'RW' | undefined): void {
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

/** The states of an ASL document, nested ones (Parallel branches, Map processors) included. */
function statesOf(asl: Json): [string, Json][] {
  return Object.entries((asl.States ?? {}) as Record<string, Json>).flatMap(([name, state]) => [
    [name, state] as [string, Json],
    ...asArray<Json>(state.Branches).flatMap(statesOf),
    ...(state.ItemProcessor ? statesOf(state.ItemProcessor) : []),
    ...(state.Iterator ? statesOf(state.Iterator) : []),
  ]);
}

const placeholderOf = (value: unknown): string | undefined =>
  typeof value === 'string' ? /^\$\{(\w+)\}$/.exec(value)?.[1] : undefined;

interface StepState {
  state: string;
  def: Json;
  placeholder: string;
  callback: boolean;
}

/** Every Task state of a workflow that runs a step: directly (`Resource`) or as a callback task. */
function stepStates(name: WorkflowName): StepState[] {
  const asl = JSON.parse(readFileSync(join(repoRoot, workflows[name].definition), 'utf8'));
  return statesOf(asl).flatMap(([state, def]): StepState[] => {
    if (def.Type !== 'Task') return [];
    const direct = placeholderOf(def.Resource);
    if (direct) return [{ state, def, placeholder: direct, callback: false }];
    const viaFunctionName = placeholderOf(def.Parameters?.FunctionName);
    if (def.Resource === 'arn:aws:states:::lambda:invoke.waitForTaskToken' && viaFunctionName) {
      return [{ state, def, placeholder: viaFunctionName, callback: true }];
    }
    return [];
  });
}

/** Whether any workflow declares that a step entry ends callback tasks (`completesTasks`). */
const stepCompletesTasks = (entry: string): boolean =>
  workflowNames.some((w) =>
    Object.values(workflows[w].tasks as Record<string, TaskDef>).some(
      (t) => t.entry === entry && (t.access as RouteAccess).completesTasks,
    ),
  );

/** Who ends the token of each callback task (see the manifests' `completesTasks`). */
const taskEnders: Record<string, string[]> = {
  // Itself when every image exists already, else the image-build event target when the build finishes.
  BuildImagesFunctionArn: ['itself', 'event target imageBuildFinished'],
  // The rollout watcher it starts (it ends no task itself).
  DeployAppsFunctionArn: ['worker rolloutWatcher'],
};

/** The logical id of a function's execution role. */
const fnRoleId = (functionId: string): string => functions[functionId].Properties.Role['Fn::GetAtt'][0];

/** Where each workflow waits for the runtime (builds and rollouts) instead of a Lambda's answer. */
const callbackPlaceholders: Record<WorkflowName, string[]> = {
  deploy: ['BuildImagesFunctionArn', 'DeployAppsFunctionArn'],
  teardown: [],
  redeployApp: ['BuildImagesFunctionArn', 'DeployAppsFunctionArn'],
  testRun: [],
};

/** Full path of an API Gateway resource, from its logical id (or the root). */
function resourcePath(ref: Json): string {
  if (ref['Fn::GetAtt']?.[1] === 'RootResourceId') return '';
  const resource = resources[ref.Ref];
  return `${resourcePath(resource.Properties.ParentId)}/${resource.Properties.PathPart}`;
}

describe('functions', () => {
  test('one function per route, per page, per unique step entry, per event rule, per schedule and per worker, nothing else', () => {
    const byRoute = Object.values(functions).map((fn) => tagValue(fn, 'preview:route'));
    const byPage = Object.values(functions).map((fn) => tagValue(fn, 'preview:page'));
    expect(byPage.filter(Boolean).sort()).toEqual(Object.keys(pages).sort());
    const bySteps = Object.values(functions).map((fn) => tagValue(fn, 'preview:step'));
    const byEvent = Object.values(functions).map((fn) => tagValue(fn, 'preview:event'));
    const bySchedule = Object.values(functions).map((fn) => tagValue(fn, 'preview:schedule'));
    const byWorker = Object.values(functions).map((fn) => tagValue(fn, 'preview:worker'));
    expect(byRoute.filter(Boolean).sort()).toEqual([...routeIds].sort());
    expect(bySteps.filter(Boolean).sort()).toEqual([...stepEntries].sort());
    expect(byEvent.filter(Boolean).sort()).toEqual(Object.keys(eventRules).sort());
    expect(bySchedule.filter(Boolean).sort()).toEqual(Object.keys(schedules).sort());
    expect(byWorker.filter(Boolean).sort()).toEqual(Object.keys(workers).sort());
    expect(Object.keys(functions)).toHaveLength(
      routeIds.length +
        Object.keys(pages).length +
        stepEntries.length +
        Object.keys(eventRules).length +
        Object.keys(schedules).length +
        Object.keys(workers).length,
    );
  });

  test.each(Object.keys(functions))(
    '%s runs Node.js >= 22 on arm64 (the browser on x86_64) with tracing and a retained log',
    (id) => {
      const props = functions[id].Properties;
      expect(props.Runtime).toMatch(/^nodejs\d+\.x$/);
      expect(Number(/^nodejs(\d+)/.exec(props.Runtime)?.[1])).toBeGreaterThanOrEqual(22);
      // Only a function that drives the headless browser runs on x86_64 (test-runs.test.ts checks it).
      const browser = declaredBrowser.has(id);
      expect(props.Architectures).toEqual([browser ? 'x86_64' : 'arm64']);
      expect(props.TracingConfig).toEqual({ Mode: 'Active' });
      if (browser) expect(props.MemorySize).toBeGreaterThanOrEqual(2048);
      else expect(props.MemorySize).toBe(512);
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

  test('the API has exactly the methods of the route manifest and its pages', () => {
    const actual = methods.map((m) => `${m.Properties.HttpMethod} ${resourcePath(m.Properties.ResourceId)}`);
    const expected = [
      ...routeIds.map((id) => `${routes[id].method} ${routes[id].path}`),
      ...Object.values(pages).map((p) => `${p.method} ${p.path}`),
    ];
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

  test.each(routeIds)(
    "%s reaches exactly the tables it declares (tenancy read for authentication, its organization's request counters)",
    (id) => {
      const route: RouteDef = routes[id];
      const expected: Partial<Record<TableName, 'R' | 'RW'>> = {
        tenancy: 'R',
        quotas: 'RW',
        ...route.access.tables,
      };
      expect(tableAccess(routeFunctionId(id))).toEqual(expected);
    },
  );

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

  test('listRuns cannot touch secret bundles, their metadata or any secret but the run-link key', () => {
    const fnId = routeFunctionId('listRuns');
    expect(tableAccess(fnId).secretBundles).toBeUndefined();
    const secrets = grantsOf(template, fnId).filter((g) =>
      g.actions.some((a) => a.startsWith('secretsmanager:')),
    );
    expect(secrets.map((g) => g.resources)).toEqual([[{ Ref: linkSecretId }]]);
  });

  test.each(routeIds)('%s gets Secrets Manager only as declared (R or RW), under the stage prefix', (id) => {
    const route: RouteDef = routes[id];
    expectSecrets(routeFunctionId(id), route.access.secrets);
  });

  test.each(routeIds)('%s may end callback tasks only if it declares completesTasks', (id) => {
    const route: RouteDef = routes[id];
    const responds = actionsOf(routeFunctionId(id)).filter((a) => taskResponseActions.includes(a));
    expect(responds.sort()).toEqual(route.access.completesTasks ? taskResponseActions : []);
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
    // Callback tasks name their step as the integration's FunctionName, plain tasks as their Resource.
    const states = Object.fromEntries(statesOf(JSON.parse(rendered)));
    for (const { state, placeholder, callback } of stepStates(name)) {
      const arn = `arn-of:${logicalId(stateless.stepFunctions.get(tasks[placeholder]!.entry)!)}`;
      if (callback) expect(states[state].Parameters.FunctionName).toBe(arn);
      else expect(states[state].Resource).toBe(arn);
    }
  });

  test.each(workflowNames)('%s may invoke its step functions and nothing else', (name) => {
    const machine = stateless.stateMachines[name] as sfn.StateMachine;
    const roleId = logicalIdOf(machine.role);
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
    'step %s reaches exactly its declared tables (no tenancy), secrets and state machine calls',
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
      const modes = declared.map((t) => t.access.secrets);
      expectSecrets(fnId, modes.includes('RW') ? 'RW' : modes.includes('R') ? 'R' : undefined);
      // A step starts only the workflows it declares and never stops or describes executions; the steps
      // that declare completesTasks may end callback tasks.
      const completesTasks = declared.some((t) => (t.access as RouteAccess).completesTasks);
      const starts = [...new Set(declared.flatMap((t) => (t.access as RouteAccess).starts ?? []))];
      const states = actionsOf(fnId).filter((a) => a.startsWith('states:'));
      expect(states.sort()).toEqual(
        [
          ...(starts.length > 0 ? ['states:StartExecution'] : []),
          ...(completesTasks ? taskResponseActions : []),
        ].sort(),
      );
      const variables = functions[fnId].Properties.Environment.Variables;
      const started = statementsOf(template, fnId).filter((s) => s.actions.includes('states:StartExecution'));
      for (const workflow of workflowNames) {
        const machineId = logicalId(stateless.stateMachines[workflow]);
        const declares = starts.includes(workflow);
        expect(started.some((s) => s.resources.some((r) => mentions(r, machineId)))).toBe(declares);
        expect(variables[stateMachineArnEnv[workflow]]).toEqual(declares ? { Ref: machineId } : undefined);
      }
    },
  );

  test.each(stepEntries)(
    'step %s stops before its state times out (a callback step within a minute)',
    (entry) => {
      // Prepare: every Task state that runs the entry, in any workflow.
      const uses = workflowNames.flatMap((w) =>
        stepStates(w).filter(
          (s) => (workflows[w].tasks as Record<string, TaskDef>)[s.placeholder]?.entry === entry,
        ),
      );
      const timeout: number = functions[logicalId(stateless.stepFunctions.get(entry)!)].Properties.Timeout;
      // Assess: the state's TimeoutSeconds must not fire while the Lambda still runs.
      expect(uses.length).toBeGreaterThan(0);
      for (const use of uses) expect(typeof use.def.TimeoutSeconds).toBe('number');
      expect(timeout).toBeLessThan(Math.min(...uses.map((u) => u.def.TimeoutSeconds as number)));
      // One handler shape per entry: a callback step gets { input, taskToken }, a plain step its input.
      const callback = uses.every((u) => u.callback);
      expect(uses.some((u) => u.callback)).toBe(callback);
      if (callback) {
        // It only starts the work: its timeout is short, not the state's (up to an hour, beyond Lambda's max).
        expect(timeout).toBe(callbackStepSeconds);
      } else {
        expect(timeout).toBe(Math.min(900, ...uses.map((u) => (u.def.TimeoutSeconds as number) - 10)));
      }
    },
  );

  test.each(workflowNames)('%s waits for a task token exactly where the runtime ends the task', (name) => {
    // Prepare
    const steps = stepStates(name);
    const callbacks = steps.filter((s) => s.callback);
    // Assess
    expect(callbacks.map((s) => s.placeholder).sort()).toEqual([...callbackPlaceholders[name]].sort());
    for (const { def } of callbacks) {
      expect(def.Resource).toBe('arn:aws:states:::lambda:invoke.waitForTaskToken');
      expect(def.Parameters.Payload).toEqual({ 'input.$': '$', 'taskToken.$': '$$.Task.Token' });
      // Without a timeout, a lost callback would hold the execution for a year.
      expect(def.TimeoutSeconds).toBeGreaterThan(callbackStepSeconds);
      // Someone may end its token: the step itself, the image-build event target (a step that starts image
      // builds) or the rollout watcher (a step that starts it).
      const placeholder = placeholderOf(def.Parameters.FunctionName)!;
      const access = (workflows[name].tasks as Record<string, TaskDef>)[placeholder]!.access as RouteAccess;
      const enders = [
        ...(access.completesTasks ? ['itself'] : []),
        ...(access.imageBuilds && (eventRules.imageBuildFinished.target.access as RouteAccess).completesTasks
          ? ['event target imageBuildFinished']
          : []),
        ...(access.invokesWatcher && (workers.rolloutWatcher.access as RouteAccess).completesTasks
          ? ['worker rolloutWatcher']
          : []),
      ];
      expect({ placeholder, enders }).toEqual({ placeholder, enders: taskEnders[placeholder] });
    }
    // Every placeholder of the definition is a step some Task state runs.
    const asl = readFileSync(join(repoRoot, workflows[name].definition), 'utf8');
    expect([...new Set(steps.map((s) => s.placeholder))].sort()).toEqual(placeholders(asl).sort());
  });

  // DeployApps reads the apps' bundles and, since preview.yaml `services:`, writes one more: the
  // generated passwords of the environment's own services (core/environments/services.ts). TearDown
  // forgets them. Narrowing both grants to that bundle's names is still to do.
  test('deploy-apps reads secret bundles and writes the services bundle; mark-failed cannot write', () => {
    const deployId = logicalId(stateless.stepFunctions.get('functions/steps/deploy-apps.ts')!);
    expect(actionsOf(deployId)).toEqual(
      expect.arrayContaining([...secretReadActions, ...secretWriteActions]),
    );
    const markFailedId = logicalId(stateless.stepFunctions.get('functions/steps/mark-failed.ts')!);
    for (const action of secretWriteActions) expect(actionsOf(markFailedId)).not.toContain(action);
  });

  test.each(stepEntries.filter((e) => stepCompletesTasks(e)))(
    'step %s (completesTasks) may end the callback tasks of every state machine of the stack, from its own policy',
    (entry) => {
      const fn = stateless.stepFunctions.get(entry)!;
      const fnId = logicalId(fn);
      const statements = statementsOf(template, fnId).filter((s) =>
        s.actions.some((a) => taskResponseActions.includes(a)),
      );
      expect(statements).toHaveLength(1);
      expect([...(statements[0]?.actions ?? [])].sort()).toEqual(taskResponseActions);
      const machineIds = workflowNames.map((w) => logicalId(stateless.stateMachines[w]));
      expect(statements[0]?.resources).toHaveLength(machineIds.length);
      for (const id of machineIds) expect(statements[0]?.resources).toContainEqual({ Ref: id });
      // Not in the role's default policy, which the function depends on (that would be a cycle).
      const dependsOn = asArray<string>(functions[fnId].DependsOn);
      const policyIds = Object.entries(resourcesOf(template, 'AWS::IAM::Policy'))
        .filter(([, p]) => mentions(p.Properties.PolicyDocument, 'states:SendTaskSuccess'))
        .filter(([, p]) => asArray<Json>(p.Properties.Roles).some((r) => r.Ref === fnRoleId(fnId)))
        .map(([id]) => id);
      expect(policyIds).toHaveLength(1);
      expect(dependsOn).not.toContain(policyIds[0]);
    },
  );
});

describe('template', () => {
  test.each([
    ['without a cluster', template],
    ['with a cluster', synthesize(clusterContext).statelessTemplate],
  ])(
    'has no dependency cycle %s (step functions, the rollout watcher, their policies and the state machines)',
    (_, t) => {
      expect(cyclesOf(t)).toEqual([]);
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
        // Every organization together (each organization's share is core/fair-share.ts; docs/scale.md).
        ThrottlingRateLimit: 1000,
        ThrottlingBurstLimit: 2000,
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

describe("each organization's fair share", () => {
  const routeDescriptions = new Set(routeIds.map((id) => `${routes[id].method} ${routes[id].path}`));
  const routeEnv = (t: ReturnType<typeof synthesize>['statelessTemplate']) =>
    Object.values(resourcesOf(t, 'AWS::Lambda::Function'))
      .filter((f) => routeDescriptions.has(String(f.Properties.Description)))
      .map((f) => f.Properties.Environment.Variables as Record<string, unknown>);

  test('unset, the route functions use their own defaults (no PREVIEW_ORG_* in their environment)', () => {
    const envs = routeEnv(template);
    expect(envs.length).toBe(routeIds.length);
    for (const env of envs) expect(Object.keys(env).filter((k) => k.startsWith('PREVIEW_ORG_'))).toEqual([]);
  });

  test('context keys set the limits on every route function, and only there', () => {
    const { statelessTemplate } = synthesize({
      orgRequestsPerSecond: '50',
      orgConcurrentDeploys: '5',
      orgConcurrentRuns: '0',
    });
    const envs = routeEnv(statelessTemplate);
    expect(envs.length).toBe(routeIds.length);
    for (const env of envs)
      expect(env).toMatchObject({
        PREVIEW_ORG_REQUESTS_PER_SECOND: '50',
        PREVIEW_ORG_CONCURRENT_DEPLOYS: '5',
        PREVIEW_ORG_CONCURRENT_RUNS: '0',
      });
    const withLimits = Object.values(resourcesOf(statelessTemplate, 'AWS::Lambda::Function')).filter(
      (f) => f.Properties.Environment?.Variables?.PREVIEW_ORG_REQUESTS_PER_SECOND !== undefined,
    );
    expect(withLimits.length).toBe(routeIds.length);
  });

  test('a bad value is refused at synth', () => {
    expect(() => synthesize({ orgRequestsPerSecond: 'lots' })).toThrow(
      /context "orgRequestsPerSecond" must be a number >= 0/,
    );
  });
});
