import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { workers } from '../../functions/manifest/workers.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import { TIMING_DEFAULTS } from '../../functions/ports/runtime/eks/cluster.js';
import { clusterStepEntries } from '../../lib/cdk/cluster.js';
import { workerInvocation } from '../../lib/cdk/constructs/workflows.js';
import { taskTarget } from '../../lib/cdk/workflow-definitions.js';
import {
  type Built,
  built,
  eksEnvOf,
  envOf,
  functionsOf,
  roleOf,
  stacks,
  watcherId,
  workerIds,
  workflowNames,
} from './cluster-stack.js';
import { asArray, type Json, logicalIdOf, mentions, repoRoot, resourcesOf, statementsOf } from './synth.js';

// The rollout watcher: its function, queue and grants, who may invoke it, and least privilege among the
// runtime functions that end tasks or start it.
const { none, full } = stacks;

describe('the rollout watcher', () => {
  const template = full.statelessTemplate;
  const fns = functionsOf(full);

  test.each(workerIds)('%s is one function of its own, with the manifest’s timeout and description', (w) => {
    const tagged = Object.entries(fns).filter(([, fn]) =>
      asArray<{ Key: string; Value: string }>(fn.Properties.Tags).some(
        (t) => t.Key === 'preview:worker' && t.Value === w,
      ),
    );
    expect(tagged.map(([id]) => id)).toEqual([logicalIdOf(full.stateless.workers[w].function)]);
    const props = tagged[0]![1].Properties;
    expect(props.Timeout).toBe(workers[w].timeoutSeconds);
    expect(props.Timeout).toBe(900);
    expect(props.Description).toBe(workers[w].description);
    expect(props.FunctionName).toBeUndefined();
  });

  test.each(workerIds)(
    '%s retries twice, then sends the invocation to its own encrypted, TLS-only queue',
    (w) => {
      const fnId = logicalIdOf(full.stateless.workers[w].function);
      const queueId = logicalIdOf(full.stateless.workers[w].failureDlq);
      const configs = Object.values(resourcesOf(template, 'AWS::Lambda::EventInvokeConfig')).filter(
        (c) => c.Properties.FunctionName.Ref === fnId,
      );
      expect(configs.map((c) => c.Properties)).toEqual([
        {
          FunctionName: { Ref: fnId },
          Qualifier: '$LATEST',
          MaximumRetryAttempts: 2,
          MaximumEventAgeInSeconds: workerInvocation.maxEventAge.toSeconds(),
          DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [queueId, 'Arn'] } } },
        },
      ]);
      const queue = resourcesOf(template, 'AWS::SQS::Queue')[queueId];
      expect(queue.Properties).toEqual(
        expect.objectContaining({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 3600 }),
      );
      const policy = Object.values(resourcesOf(template, 'AWS::SQS::QueuePolicy')).find((p) =>
        asArray<Json>(p.Properties.Queues).some((q) => q.Ref === queueId),
      );
      expect(asArray<Json>(policy?.Properties.PolicyDocument.Statement)).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
      const sends = statementsOf(template, fnId).filter((s) => s.actions.some((a) => a.startsWith('sqs:')));
      expect(sends).toHaveLength(1);
      expect(sends[0]?.resources).toEqual([{ 'Fn::GetAtt': [queueId, 'Arn'] }]);
      const outputs = Object.values(template.toJSON().Outputs as Record<string, Json>).map((o) => o.Value);
      expect(outputs).toContainEqual({ Ref: queueId });
      expect(outputs).toContainEqual({ Ref: fnId });
    },
  );

  test('ends (and heartbeats) the callback tasks of every state machine, from a policy of its own', () => {
    const fnId = watcherId(full);
    const statements = statementsOf(template, fnId).filter((s) =>
      s.actions.some((a) => a.startsWith('states:')),
    );
    expect(statements).toHaveLength(1);
    expect([...statements[0]!.actions].sort()).toEqual([
      'states:SendTaskFailure',
      'states:SendTaskHeartbeat',
      'states:SendTaskSuccess',
    ]);
    for (const w of workflowNames) {
      expect(statements[0]!.resources).toContainEqual({ Ref: logicalIdOf(full.stateless.stateMachines[w]) });
    }
  });

  test('invokes itself through a policy the function does not depend on, and finds its own name itself', () => {
    const fnId = watcherId(full);
    const policies = Object.entries(resourcesOf(template, 'AWS::IAM::Policy')).filter(
      ([, p]) =>
        asArray<Json>(p.Properties.Roles).some((r) => r.Ref === roleOf(full, fnId)) &&
        mentions(p.Properties.PolicyDocument, 'lambda:InvokeFunction'),
    );
    expect(policies).toHaveLength(1);
    expect(asArray<string>(fns[fnId].DependsOn)).not.toContain(policies[0]![0]);
    // A function cannot name itself in its environment: the code falls back to AWS_LAMBDA_FUNCTION_NAME.
    expect(envOf(full, fnId).ROLLOUT_WATCHER_FUNCTION).toBeUndefined();
  });

  test('hands over in time, outlives the rollout deadline in Lambda’s queue, and is missed within minutes', () => {
    // A watcher watches one slice and re-invokes itself 15 s before its timeout.
    expect(workers.rolloutWatcher.timeoutSeconds * 1000).toBeGreaterThanOrEqual(
      TIMING_DEFAULTS.sliceMs + 15_000,
    );
    // Lambda keeps (and retries) an invocation at least until the rollout's deadline.
    expect(workerInvocation.maxEventAge.toMilliseconds()).toBeGreaterThanOrEqual(
      TIMING_DEFAULTS.readyTimeoutMs,
    );
    expect(workerInvocation.retryAttempts).toBe(2);
    // Every callback task a cluster step waits in has a heartbeat timeout: a lost watcher fails it within
    // minutes, and a live one (a heartbeat every heartbeatMs, and at the start of each invocation) never.
    const waits = workflowNames.flatMap((w) => {
      const asl = JSON.parse(readFileSync(join(repoRoot, workflows[w].definition), 'utf8'));
      const tasks = workflows[w].tasks as Record<string, TaskDef>;
      return Object.values(asl.States as Record<string, Json>).filter((state) => {
        const t = taskTarget(state);
        return t?.callback && clusterStepEntries.includes(tasks[t.placeholder]?.entry ?? '');
      });
    });
    expect(waits.length).toBeGreaterThan(0);
    for (const state of waits) {
      expect(state.HeartbeatSeconds).toBeGreaterThanOrEqual((2 * TIMING_DEFAULTS.heartbeatMs) / 1000);
      expect(state.HeartbeatSeconds).toBeLessThanOrEqual(600);
      expect(state.TimeoutSeconds).toBeLessThanOrEqual(workerInvocation.maxEventAge.toSeconds());
    }
  });
});

describe('invoking the watcher', () => {
  test.each(built(full))(
    '%s may invoke it exactly when it declares invokesWatcher, and knows its name',
    (_, fn) => {
      const invokes = statementsOf(full.statelessTemplate, fn.id).filter((s) =>
        s.actions.includes('lambda:InvokeFunction'),
      );
      const env = envOf(full, fn.id);
      if (!fn.invokesWatcher) {
        expect(invokes).toEqual([]);
        expect(env.ROLLOUT_WATCHER_FUNCTION).toBeUndefined();
        return;
      }
      expect(invokes.map((s) => [s.actions, s.resources])).toEqual([
        [['lambda:InvokeFunction'], [{ 'Fn::GetAtt': [watcherId(full), 'Arn'] }]],
      ]);
      if (!fn.isWatcher) expect(env.ROLLOUT_WATCHER_FUNCTION).toEqual({ Ref: watcherId(full) });
    },
  );

  test.each(built(none).filter(([, fn]) => fn.invokesWatcher && !fn.isWatcher))(
    '%s knows the watcher without a cluster too',
    (_, fn) => {
      expect(envOf(none, fn.id).ROLLOUT_WATCHER_FUNCTION).toEqual({ Ref: watcherId(none) });
    },
  );
});

describe('least privilege among the runtime functions (with a cluster)', () => {
  const taskResponse = ['states:SendTaskFailure', 'states:SendTaskHeartbeat', 'states:SendTaskSuccess'];
  const byLabel = Object.fromEntries(built(full));
  const fnOf = (label: string): Built => {
    expect(byLabel[label]).toBeDefined();
    return byLabel[label]!;
  };
  const respondsTo = (fn: Built) =>
    statementsOf(full.statelessTemplate, fn.id)
      .flatMap((st) => st.actions)
      .filter((a) => a.startsWith('states:SendTask'))
      .sort();
  const invokesTheWatcher = (fn: Built) =>
    statementsOf(full.statelessTemplate, fn.id).some(
      (st) =>
        st.actions.includes('lambda:InvokeFunction') &&
        st.resources.some((r) => mentions(r, watcherId(full))),
    );
  const buildImages = 'step functions/steps/build-images.ts';
  const deployApps = 'step functions/steps/deploy-apps.ts';
  const tearDown = 'step functions/steps/tear-down.ts';

  test.each([buildImages, 'event target imageBuildFinished'])(
    '%s ends tasks (SendTask*) but neither starts the watcher nor gets the cluster’s settings',
    (label) => {
      const fn = fnOf(label);
      expect(fn).toMatchObject({ runtime: false, invokesWatcher: false, completesTasks: true });
      expect(respondsTo(fn)).toEqual(taskResponse);
      expect(invokesTheWatcher(fn)).toBe(false);
      expect(envOf(full, fn.id).ROLLOUT_WATCHER_FUNCTION).toBeUndefined();
      expect(eksEnvOf(full, fn.id)).toEqual({});
    },
  );

  test('DeployApps gets the cluster’s settings and starts the watcher, but ends no task itself', () => {
    const fn = fnOf(deployApps);
    expect(fn).toMatchObject({ runtime: true, invokesWatcher: true, completesTasks: false });
    expect(respondsTo(fn)).toEqual([]);
    expect(invokesTheWatcher(fn)).toBe(true);
    expect(envOf(full, fn.id).ROLLOUT_WATCHER_FUNCTION).toEqual({ Ref: watcherId(full) });
    expect(eksEnvOf(full, fn.id).EKS_CLUSTER_NAME).toBe('previews');
  });

  test('TearDown gets the cluster’s settings only: no task to end, no watcher to start', () => {
    const fn = fnOf(tearDown);
    expect(fn).toMatchObject({ runtime: true, invokesWatcher: false, completesTasks: false });
    expect(respondsTo(fn)).toEqual([]);
    expect(invokesTheWatcher(fn)).toBe(false);
    expect(envOf(full, fn.id).ROLLOUT_WATCHER_FUNCTION).toBeUndefined();
    expect(eksEnvOf(full, fn.id).EKS_CLUSTER_NAME).toBe('previews');
  });

  test('the rollout watcher has all three: the cluster, itself, and the tasks', () => {
    const fn = fnOf('worker rolloutWatcher');
    expect(fn).toMatchObject({ runtime: true, invokesWatcher: true, completesTasks: true });
    expect(respondsTo(fn)).toEqual(taskResponse);
    expect(invokesTheWatcher(fn)).toBe(true);
    expect(eksEnvOf(full, fn.id).EKS_CLUSTER_NAME).toBe('previews');
  });

  test('only the image builds and the watcher may end tasks; only DeployApps and the watcher start it', () => {
    const all = built(full);
    expect(
      all
        .filter(([, fn]) => respondsTo(fn).length > 0)
        .map(([l]) => l)
        .sort(),
    ).toEqual([buildImages, 'event target imageBuildFinished', 'worker rolloutWatcher'].sort());
    expect(
      all
        .filter(([, fn]) => invokesTheWatcher(fn))
        .map(([l]) => l)
        .sort(),
    ).toEqual([deployApps, 'worker rolloutWatcher'].sort());
  });
});
