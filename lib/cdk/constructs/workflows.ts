import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import type { RouteAccess } from '../../../functions/manifest/routes.js';
import { type WorkerId, workers } from '../../../functions/manifest/workers.js';
import { type TaskDef, workflows } from '../../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../../functions/ports/workflows/port.js';
import type { AccessResources, ClusterSettings } from '../access.js';
import { repoRoot } from '../bundling.js';
import { clusterStepEntries } from '../cluster.js';
import { keepStackLevelIds } from '../logical-ids.js';
import { acknowledge } from '../nag.js';
import { pascal } from '../stateful-stack.js';
import {
  lambdaMaxSeconds,
  placeholders,
  stepAccessByEntry,
  stepTimeoutMarginSeconds,
  stepTimeouts,
  workflowNames,
} from '../workflow-definitions.js';
import { entryFunction, type FunctionDefaults } from './entry-function.js';
import { invocationRecord, type Operations } from './operations.js';
import type { ServiceFunction } from './service-function.js';

/**
 * Lambda's handling of a worker's asynchronous invocation (the runtime and the watcher itself invoke it):
 * a function error is retried twice, then the event goes to the worker's on-failure queue. Half an hour:
 * the longest a DeployApps task waits for the watcher (its TimeoutSeconds, 1800 s); an older event ends
 * no task. (The watcher's own deadline, 20 minutes after the rollout started, comes first anyway.)
 */
export const workerInvocation = { retryAttempts: 2, maxEventAge: Duration.minutes(30) };

/** A worker of the manifest, as built. */
export interface WorkerResources {
  function: ServiceFunction;
  /** Its on-failure destination: invocations it failed on after Lambda's retries. */
  failureDlq: sqs.Queue;
}

export interface WorkflowsProps {
  /** What every function is built with. */
  functions: FunctionDefaults;
  /** Makes the workers' failure queues. */
  operations: Operations;
  /**
   * What the steps' and workers' access may refer to, but the state machines and the runtime, which are
   * this construct's own.
   */
  access: Omit<AccessResources, 'stateMachines' | 'runtime'>;
  /** The cluster previews run on. @default - no cluster: deploys fail saying none is configured */
  cluster?: ClusterSettings;
}

/** `fetch-source` → `FetchSource`: a step's construct id and output name, from its entry. */
export const stepName = (entry: string): string =>
  pascal(basename(entry, '.ts').replace(/-(\w)/g, (_, c: string) => c.toUpperCase()));

/**
 * Workflows: owns the state machines of functions/manifest/workflows.ts (deploy, teardown, redeployApp,
 * testRun; the ASL files with each `${Placeholder}` replaced by its step's ARN) with their log groups, one
 * function per unique step entry (the testRun executor, the runs' browser function, among them), and the
 * workers (functions/manifest/workers.ts: the rollout watcher), each with its on-failure queue. Each step
 * and worker is granted what its manifest entries declare once the machines exist; those that call the
 * cluster's API get its access.
 */
export class Workflows extends Construct {
  /** One function per unique step entry, by entry path. */
  readonly stepFunctions = new Map<string, ServiceFunction>();
  /** One state machine per workflow. */
  readonly stateMachines = {} as Record<WorkflowName, sfn.StateMachine>;
  /** Per worker: its function and the queue its failed invocations end in. */
  readonly workers = {} as Record<WorkerId, WorkerResources>;
  /** What a manifest entry's access may refer to, the state machines and the runtime included. */
  readonly resources: AccessResources;
  /** What each step entry declares, across every workflow that runs it. */
  readonly stepAccess = stepAccessByEntry();

  constructor(scope: Construct, id: string, props: WorkflowsProps) {
    super(scope, id);
    const timeouts = stepTimeouts();
    const stepAccess = this.stepAccess;
    for (const [entry, access] of stepAccess) {
      const fn = entryFunction(this, `${stepName(entry)}Step`, props.functions, {
        entry,
        kind: 'step',
        access,
        description: `Step ${entry}`,
        timeout: Duration.seconds(timeouts.get(entry) ?? lambdaMaxSeconds - stepTimeoutMarginSeconds),
        tag: ['preview:step', entry],
      });
      this.stepFunctions.set(entry, fn);
    }
    for (const workerId of Object.keys(workers) as WorkerId[]) {
      this.workers[workerId] = this.worker(workerId, props);
    }
    for (const name of workflowNames) this.stateMachines[name] = this.stateMachine(name, props.functions);
    this.resources = {
      ...props.access,
      stateMachines: this.stateMachines,
      runtime: { cluster: props.cluster, watcher: this.workers.rolloutWatcher.function },
    };
    // Each step gets what its manifest entries declare; `runtime` steps may end the machines' callback tasks.
    for (const [entry, access] of stepAccess) this.step(entry).bindAccess(access, this.resources);
    for (const workerId of Object.keys(workers) as WorkerId[]) {
      this.workers[workerId].function.bindAccess(workers[workerId].access as RouteAccess, this.resources);
    }
    // Only the functions that call the cluster's API may reach it (DescribeCluster, an access entry).
    if (props.cluster) {
      for (const entry of clusterStepEntries) this.step(entry).bindClusterAccess(props.cluster);
      for (const workerId of Object.keys(workers) as WorkerId[]) {
        this.workers[workerId].function.bindClusterAccess(props.cluster);
      }
    }
  }

  /** The function of a step entry. */
  step(entry: string): ServiceFunction {
    const fn = this.stepFunctions.get(entry);
    if (!fn) throw new Error(`no step function for ${entry}`);
    return fn;
  }

  /**
   * One state machine: its ASL file with each `${Placeholder}` replaced by its step function's ARN,
   * X-Ray traced, logging transitions and errors (never inputs or outputs) to its own log group.
   */
  private stateMachine(name: WorkflowName, functions: FunctionDefaults): sfn.StateMachine {
    const workflow = workflows[name];
    const tasks = Object.entries(workflow.tasks) as [string, TaskDef][];
    const path = join(repoRoot, workflow.definition);
    const missing = placeholders(readFileSync(path, 'utf8')).filter((p) => !(p in workflow.tasks));
    if (missing.length > 0) throw new Error(`${workflow.definition}: no task for ${missing.join(', ')}`);
    const logGroup = new logs.LogGroup(this, `${pascal(name)}MachineLogs`, {
      // Step Functions log groups under /aws/vendedlogs/ avoid the CloudWatch resource-policy size limit.
      logGroupName: `/aws/vendedlogs/states/${Stack.of(this).stackName}-${name}`,
      retention: functions.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    keepStackLevelIds(logGroup);
    const machine = new sfn.StateMachine(this, `${pascal(name)}Machine`, {
      definitionBody: sfn.DefinitionBody.fromFile(path),
      definitionSubstitutions: Object.fromEntries(
        tasks.map(([placeholder, task]) => [placeholder, this.step(task.entry).functionArn]),
      ),
      stateMachineType: sfn.StateMachineType.STANDARD,
      tracingEnabled: true,
      // State transitions and errors, never inputs or outputs (they carry secret-adjacent data).
      logs: { destination: logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false },
    });
    // The unqualified ARN the definition names, not also its versions and aliases (grantInvoke's `:*`).
    machine.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [...new Set(tasks.map(([, task]) => task.entry))].map((e) => this.step(e).functionArn),
      }),
    );
    acknowledge(
      machine.role,
      'AwsSolutions-IAM5[Resource::*]',
      'Added by CDK for X-Ray tracing (xray:PutTraceSegments, PutTelemetryRecords, GetSamplingRules, ' +
        'GetSamplingTargets) and CloudWatch Logs delivery (logs:CreateLogDelivery and the other *LogDelivery, ' +
        'ResourcePolicy and DescribeLogGroups calls): none of them has resource-level permissions.',
    );
    return machine;
  }

  /**
   * One worker: a ServiceFunction (kind `worker`, the manifest's timeout) invoked asynchronously by the
   * service, so Lambda retries a failed invocation twice and then sends it to the worker's on-failure
   * queue (encrypted, TLS only, 14 days). Granted from its access once the state machines exist.
   */
  private worker(workerId: WorkerId, props: WorkflowsProps): WorkerResources {
    const def = workers[workerId];
    const id = pascal(workerId);
    if (def.timeoutSeconds > lambdaMaxSeconds)
      throw new Error(`worker ${workerId}: timeoutSeconds above Lambda's ${lambdaMaxSeconds}`);
    const fn = entryFunction(this, id, props.functions, {
      entry: def.entry,
      kind: 'worker',
      access: def.access as RouteAccess,
      description: def.description,
      timeout: Duration.seconds(def.timeoutSeconds),
      tag: ['preview:worker', workerId],
    });
    const failureDlq = props.operations.failureQueue(this, `${id}FailureDlq`, {
      holds: `Invocations of the ${workerId} worker that failed, after Lambda's retries`,
      message: invocationRecord,
      action:
        'Replaying is pointless: the task it was to end has already failed on its missed heartbeat. Fix ' +
        'the cause, redeploy the environment, then delete the message.',
    });
    fn.configureAsyncInvoke({ ...workerInvocation, onFailure: new destinations.SqsDestination(failureDlq) });
    return { function: fn, failureDlq };
  }
}
