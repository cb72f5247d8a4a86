import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { eventRules } from '../../functions/manifest/events.js';
import type { RouteAccess } from '../../functions/manifest/routes.js';
import type { TableName } from '../../functions/manifest/tables.js';
import { workers } from '../../functions/manifest/workers.js';
import { substitute, type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { stateMachineArnEnv } from '../../lib/cdk/access.js';
import { callbackStepSeconds, placeholders } from '../../lib/cdk/workflow-definitions.js';
import {
  actionsOf,
  expectSecrets,
  functions,
  logicalId,
  resources,
  secretReadActions,
  secretWriteActions,
  stateless,
  stepEntries,
  tableAccess,
  taskResponseActions,
  template,
  workflowNames,
} from './stateless-stack.js';
import { asArray, type Json, logicalIdOf, mentions, repoRoot, resourcesOf, statementsOf } from './synth.js';

// The stateless stack's workflows: state machines, their definitions, callback tasks and their steps.

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
