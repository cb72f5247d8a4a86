import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Tags } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import {
  type RouteAccess,
  type RouteDef,
  type RouteId,
  routeIds,
  routes,
} from '../../functions/manifest/routes.js';
import { tableNames } from '../../functions/manifest/tables.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { ApiFunction, repoRoot, type Tables } from './api-function.js';
import { pascal } from './stateful-stack.js';

export interface StatelessStackProps extends StackProps {
  /** The tables of the stateful stack. */
  tables: Tables;
  /** Secret bundles are named `<secretNamePrefix>/<applicationId>/<app>`; functions may touch only those. */
  secretNamePrefix: string;
  /** API Gateway stage (the first path segment of the API URL). @default 'api' */
  apiStageName?: string;
  /** Steady-state requests per second across the API. @default 50 */
  throttlingRateLimit?: number;
  /** @default 100 */
  throttlingBurstLimit?: number;
  /**
   * Create the account-level role API Gateway needs to write access logs (AWS::ApiGateway::Account).
   * Turn off when the account already has one configured. @default true
   */
  apiGatewayCloudWatchRole?: boolean;
  /** @default logs.RetentionDays.ONE_MONTH */
  logRetention?: logs.RetentionDays;
}

const workflowNames = Object.keys(workflows) as WorkflowName[];
/** The longest a Lambda can run. */
const lambdaMaxSeconds = 900;
/** A step's Lambda stops this long before its state's TimeoutSeconds, so a timed-out step is really over. */
const stepTimeoutMarginSeconds = 10;
/**
 * The Lambda timeout of a callback task's step (`lambda:invoke.waitForTaskToken`). Such a Lambda only starts
 * the work (a build, a rollout) and returns; the runtime ends the task later through its token, so the
 * state's TimeoutSeconds (up to an hour, beyond Lambda's 15 minutes anyway) bounds the runtime, not the
 * Lambda. A minute covers a cold start, the DynamoDB transition, secret reads and the runtime API calls
 * that start the work, and a hung invocation fails the Task (into its Retry and Catch) within a minute
 * instead of holding it for the whole wait.
 */
export const callbackStepSeconds = 60;

/**
 * The stateless stack: everything that can be destroyed and recreated without losing data. Reads top to
 * bottom: (1) step functions, (2) state machines, (3) route functions, (4) REST API, (5) outputs.
 * Routes and workflows come from the manifests (functions/manifest/routes.ts, functions/manifest/workflows.ts) the local
 * server also runs, so the cloud and local APIs cannot drift.
 */
export class StatelessStack extends Stack {
  /** One function per unique step entry, by entry path. */
  readonly stepFunctions = new Map<string, ApiFunction>();
  readonly stateMachines: Record<WorkflowName, sfn.StateMachine>;
  readonly routeFunctions: Record<RouteId, ApiFunction>;
  readonly api: apigateway.RestApi;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { tables, secretNamePrefix } = props;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;

    // 1. Step functions: one per unique step entry (granted in 2, once the state machines exist).
    const timeouts = stepTimeouts();
    const stepAccess = stepAccessByEntry();
    for (const entry of stepAccess.keys()) {
      const fn = new ApiFunction(this, `${pascal(camel(basename(entry, '.ts')))}Step`, {
        entry,
        kind: 'step',
        tables,
        secretNamePrefix,
        logRetention,
        description: `Step ${entry}`,
        timeout: Duration.seconds(timeouts.get(entry) ?? lambdaMaxSeconds - stepTimeoutMarginSeconds),
      });
      Tags.of(fn).add('preview:step', entry);
      this.stepFunctions.set(entry, fn);
    }

    // 2. State machines: the ASL files with each `${Placeholder}` replaced by its step function's ARN.
    this.stateMachines = {} as Record<WorkflowName, sfn.StateMachine>;
    for (const name of workflowNames) {
      const workflow = workflows[name];
      const tasks = Object.entries(workflow.tasks) as [string, TaskDef][];
      const path = join(repoRoot, workflow.definition);
      const missing = placeholders(readFileSync(path, 'utf8')).filter((p) => !(p in workflow.tasks));
      if (missing.length > 0) throw new Error(`${workflow.definition}: no task for ${missing.join(', ')}`);
      const logGroup = new logs.LogGroup(this, `${pascal(name)}MachineLogs`, {
        // Step Functions log groups under /aws/vendedlogs/ avoid the CloudWatch resource-policy size limit.
        logGroupName: `/aws/vendedlogs/states/${this.stackName}-${name}`,
        retention: logRetention,
        removalPolicy: RemovalPolicy.DESTROY,
      });
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
      for (const [, task] of tasks) this.step(task.entry).grantInvoke(machine);
      this.stateMachines[name] = machine;
    }
    // Each step gets what its manifest entries declare; `runtime` steps may end the machines' callback tasks.
    for (const [entry, access] of stepAccess) {
      this.step(entry).bindAccess(access, { tables, stateMachines: this.stateMachines });
    }

    // 3. Route functions: one per route; tenancy is readable by all (authentication), the rest per route.
    this.routeFunctions = {} as Record<RouteId, ApiFunction>;
    for (const routeId of routeIds) {
      const route: RouteDef = routes[routeId];
      const fn = new ApiFunction(this, `${pascal(routeId)}Route`, {
        entry: route.entry,
        kind: 'api',
        tables,
        secretNamePrefix,
        logRetention,
        description: `${route.method} ${route.path}`,
      })
        .bindTable(tables.tenancy, 'R')
        .bindAccess(route.access, { tables, stateMachines: this.stateMachines });
      Tags.of(fn).add('preview:route', routeId);
      this.routeFunctions[routeId] = fn;
    }

    // 4. REST API: one resource tree for every route group; authentication happens in the handlers.
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.api = new apigateway.RestApi(this, 'Api', {
      restApiName: this.stackName,
      description: 'Preview environments, secret bundles, scenario recipes and test runs',
      endpointTypes: [apigateway.EndpointType.REGIONAL],
      cloudWatchRole: props.apiGatewayCloudWatchRole ?? true,
      deployOptions: {
        stageName: props.apiStageName ?? 'api',
        throttlingRateLimit: props.throttlingRateLimit ?? 50,
        throttlingBurstLimit: props.throttlingBurstLimit ?? 100,
        tracingEnabled: true,
        metricsEnabled: true,
        // Execution logs and data traces would include request bodies (secret values); access logs only.
        loggingLevel: apigateway.MethodLoggingLevel.OFF,
        dataTraceEnabled: false,
        accessLogDestination: new apigateway.LogGroupLogDestination(accessLogs),
        accessLogFormat: accessLogFormat(),
      },
    });
    for (const routeId of routeIds) {
      const route: RouteDef = routes[routeId];
      this.api.root
        .resourceForPath(route.path)
        .addMethod(
          route.method,
          new apigateway.LambdaIntegration(this.routeFunctions[routeId], { allowTestInvoke: false }),
          { authorizationType: apigateway.AuthorizationType.NONE },
        );
    }
    addErrorResponses(this.api);

    // 5. Outputs.
    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'Base URL of the API' });
    for (const name of tableNames) {
      new CfnOutput(this, `${pascal(name)}TableName`, { value: tables[name].tableName });
    }
    for (const name of workflowNames) {
      new CfnOutput(this, `${pascal(name)}StateMachineArn`, {
        value: this.stateMachines[name].stateMachineArn,
      });
    }
  }

  private step(entry: string): ApiFunction {
    const fn = this.stepFunctions.get(entry);
    if (!fn) throw new Error(`no step function for ${entry}`);
    return fn;
  }
}

/** `${Name}` placeholders of an ASL document. */
export function placeholders(asl: string): string[] {
  return [...new Set([...asl.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1] as string))];
}

/** Each step entry once, with the union of what every workflow declares for it. */
function stepAccessByEntry(): Map<string, RouteAccess> {
  const byEntry = new Map<string, RouteAccess>();
  for (const name of workflowNames) {
    for (const task of Object.values(workflows[name].tasks) as TaskDef[]) {
      const merged: RouteAccess = byEntry.get(task.entry) ?? { tables: {} };
      for (const [table, mode] of Object.entries(task.access.tables) as [keyof Tables, 'R' | 'RW'][]) {
        if (merged.tables[table] !== 'RW') merged.tables[table] = mode;
      }
      if (task.access.secrets && merged.secrets !== 'RW') merged.secrets = task.access.secrets;
      if (task.access.sourceHost) merged.sourceHost = true;
      if (task.access.runtime) merged.runtime = true;
      byEntry.set(task.entry, merged);
    }
  }
  return byEntry;
}

/**
 * The Lambda timeout (seconds) of each step entry, across every Task state that runs it in any workflow:
 * the shortest bound of those states. A plain task (`"Resource": "${Placeholder}"`, or `lambda:invoke` with
 * the placeholder as `FunctionName`) runs for the whole state, so its Lambda stops
 * `stepTimeoutMarginSeconds` before the state's TimeoutSeconds. A callback task (`lambda:invoke.waitForTaskToken`)
 * only starts the work, so its Lambda gets `callbackStepSeconds` (still within the state's TimeoutSeconds).
 * Without a TimeoutSeconds, a plain task's Lambda gets Lambda's maximum less the margin.
 */
export function stepTimeouts(): Map<string, number> {
  const result = new Map<string, number>();
  const visit = (node: unknown, tasks: Record<string, TaskDef>): void => {
    if (Array.isArray(node)) for (const child of node) visit(child, tasks);
    if (!node || typeof node !== 'object') return;
    const target = taskTarget(node);
    const task = target ? tasks[target.placeholder] : undefined;
    const stateTimeout = (node as { TimeoutSeconds?: unknown }).TimeoutSeconds;
    if (task && target) {
      const bound = Math.min(
        lambdaMaxSeconds,
        (typeof stateTimeout === 'number' ? stateTimeout : lambdaMaxSeconds) - stepTimeoutMarginSeconds,
        target.callback ? callbackStepSeconds : lambdaMaxSeconds,
      );
      result.set(task.entry, Math.min(result.get(task.entry) ?? lambdaMaxSeconds, bound));
    }
    for (const child of Object.values(node)) visit(child, tasks);
  };
  for (const name of workflowNames) {
    const workflow = workflows[name];
    visit(JSON.parse(readFileSync(join(repoRoot, workflow.definition), 'utf8')), workflow.tasks);
  }
  return result;
}

/**
 * The step a Task state runs, if it runs one through a `${Placeholder}`: either as its Resource, or as the
 * `FunctionName` of the Lambda service integration (`arn:aws:states:::lambda:invoke[.waitForTaskToken]`,
 * Parameters in JSONPath, Arguments in JSONata). `callback` when the state waits for a task token.
 */
export function taskTarget(state: object): { placeholder: string; callback: boolean } | undefined {
  const { Type, Resource, Parameters, Arguments } = state as Record<string, unknown>;
  if (Type !== undefined && Type !== 'Task') return undefined;
  if (typeof Resource !== 'string') return undefined;
  const direct = /^\$\{(\w+)\}$/.exec(Resource)?.[1];
  if (direct) return { placeholder: direct, callback: false };
  const integration = /^arn:[\w-]+:states:::lambda:invoke(\.waitForTaskToken)?$/.exec(Resource);
  if (!integration) return undefined;
  const args = (Parameters ?? Arguments) as { FunctionName?: unknown } | undefined;
  const name = typeof args?.FunctionName === 'string' ? args.FunctionName : undefined;
  const placeholder = name ? /^\$\{(\w+)\}$/.exec(name)?.[1] : undefined;
  return placeholder ? { placeholder, callback: integration[1] !== undefined } : undefined;
}

/** `fetch-source` → `fetchSource`. */
const camel = (kebab: string): string => kebab.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

/**
 * One JSON line per request: who, what, outcome and latency. No headers, query strings or bodies, and the
 * resource template (`/run/{run_id}`) rather than the concrete path.
 */
function accessLogFormat(): apigateway.AccessLogFormat {
  const f = apigateway.AccessLogField;
  const fields = {
    requestId: f.contextRequestId(),
    ip: f.contextIdentitySourceIp(),
    time: f.contextRequestTime(),
    method: f.contextHttpMethod(),
    resource: f.contextResourcePath(),
    status: f.contextStatus(),
    responseLength: f.contextResponseLength(),
    latencyMs: f.contextResponseLatency(),
    integrationStatus: f.contextIntegrationStatus(),
  };
  const quoted = Object.entries(fields).map(([name, value]) => `"${name}":"${value}"`);
  // messageString is the message already quoted and escaped for JSON.
  return apigateway.AccessLogFormat.custom(`{${quoted.join(',')},"error":$context.error.messageString}`);
}

/**
 * Errors API Gateway answers itself get the service's `{ "error": "..." }` shape. An unknown route is
 * a 404 (API Gateway reports it as a missing authentication token, 403). `messageString` is already a
 * quoted JSON string.
 */
function addErrorResponses(api: apigateway.RestApi): void {
  const json = { 'Content-Type': "'application/json'" };
  api.addGatewayResponse('RouteNotFound', {
    type: apigateway.ResponseType.MISSING_AUTHENTICATION_TOKEN,
    statusCode: '404',
    responseHeaders: json,
    templates: { 'application/json': '{"error":"route not found"}' },
  });
  for (const [id, type] of [
    ['Default4xx', apigateway.ResponseType.DEFAULT_4XX],
    ['Default5xx', apigateway.ResponseType.DEFAULT_5XX],
  ] as const) {
    api.addGatewayResponse(id, {
      type,
      responseHeaders: json,
      templates: { 'application/json': '{"error":$context.error.messageString}' },
    });
  }
}
