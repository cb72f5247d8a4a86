import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import type { RouteAccess } from '../../functions/manifest/routes.js';
import { type TableName, tableNames, tables } from '../../functions/manifest/tables.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { lambdaBundling } from './bundling.js';

/** The repository root (entries in the route and workflow manifests are relative to it). */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The env var through which a function learns each workflow's state machine ARN (read by config.ts). */
export const stateMachineArnEnv: Record<WorkflowName, string> = {
  deploy: 'STATE_MACHINE_DEPLOY_ARN',
  teardown: 'STATE_MACHINE_TEARDOWN_ARN',
  redeployApp: 'STATE_MACHINE_REDEPLOY_APP_ARN',
};

/** What the function is: an API route handler or a state machine step. */
export type FunctionKind = 'api' | 'step';

/** Every table of the stateful stack, by manifest name. */
export type Tables = Record<TableName, dynamodb.ITable>;

export interface ApiFunctionProps {
  /** Handler module, relative to the repository root (as in functions/manifest/routes.ts and workflows.ts). */
  entry: string;
  kind: FunctionKind;
  /** Every table; each name is passed as its `TABLE_*` env var (access is granted separately). */
  tables: Tables;
  /** Prefix of the secret-bundle names (`<prefix>/<applicationId>/<app>`); passed as SECRET_NAME_PREFIX. */
  secretNamePrefix: string;
  /**
   * @default 28 seconds for `api` (API Gateway gives up at 29 s), 15 minutes for `step`
   */
  timeout?: Duration;
  /** @default 512 */
  memorySize?: number;
  /** @default logs.RetentionDays.ONE_MONTH */
  logRetention?: logs.RetentionDays;
  description?: string;
}

/**
 * Every Lambda of the service (route handlers and workflow steps): Node.js 22 on arm64, X-Ray tracing,
 * its own log group with a retention, an esbuild ESM bundle (minified, source maps, AWS SDK v3 bundled
 * and tree-shaken rather than taken from the runtime) and the environment config.ts validates.
 * It starts with no permissions beyond its logs and traces; the `bind*` methods grant least privilege.
 */
export class ApiFunction extends NodejsFunction {
  readonly kind: FunctionKind;
  private readonly secretNamePrefix: string;

  constructor(scope: Construct, id: string, props: ApiFunctionProps) {
    const entry = isAbsolute(props.entry) ? props.entry : join(repoRoot, props.entry);
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    super(scope, id, {
      entry,
      handler: 'handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? (props.kind === 'api' ? Duration.seconds(28) : Duration.minutes(15)),
      tracing: lambda.Tracing.ACTIVE,
      logGroup,
      projectRoot: repoRoot,
      depsLockFilePath: join(repoRoot, 'package-lock.json'),
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        SECRET_NAME_PREFIX: props.secretNamePrefix,
        ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, props.tables[t].tableName])),
      },
      bundling: {
        format: OutputFormat.ESM,
        target: lambdaBundling.target,
        minify: lambdaBundling.minify,
        sourceMap: true,
        sourcesContent: false,
        mainFields: [...lambdaBundling.mainFields],
        banner: lambdaBundling.banner,
        // Nothing external: the AWS SDK v3 clients are bundled and tree-shaken, pinned by our lock file.
        externalModules: [],
      },
    });
    this.kind = props.kind;
    this.secretNamePrefix = props.secretNamePrefix;
  }

  /** Read (`R`: GetItem, Query, Scan, BatchGet…) or read-write (`RW`) access to a table and its indexes. */
  bindTable(table: dynamodb.ITable, mode: 'R' | 'RW'): this {
    if (mode === 'RW') table.grantReadWriteData(this);
    else table.grantReadData(this);
    return this;
  }

  /** StartExecution on a state machine, and its ARN in the env var config.ts reads for that workflow. */
  bindWorkflow(workflow: WorkflowName, stateMachine: sfn.IStateMachine): this {
    stateMachine.grantStartExecution(this);
    this.addEnvironment(stateMachineArnEnv[workflow], stateMachine.stateMachineArn);
    return this;
  }

  /**
   * Secret bundles: only the secrets under this deployment's prefix, only the calls the Secrets Manager
   * adapter makes. `R` reads values (GetSecretValue, plus DescribeSecret: metadata, never values); `RW`
   * also writes them (PutSecretValue, and CreateSecret with tags, which needs TagResource).
   */
  bindSecrets(mode: 'R' | 'RW'): this {
    const resource = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      resourceName: `${this.secretNamePrefix}/*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    const read = ['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'];
    const write = [
      'secretsmanager:PutSecretValue',
      'secretsmanager:CreateSecret',
      'secretsmanager:TagResource',
    ];
    this.addToRolePolicy(
      new iam.PolicyStatement({ actions: mode === 'RW' ? [...read, ...write] : read, resources: [resource] }),
    );
    return this;
  }

  /**
   * The runtime seam: end (or heartbeat) the callback tasks of these state machines with the task token
   * the step was given. The statement lives in its own policy, not the role's default policy: a function
   * depends on its default policy, and a state machine depends on the step functions whose ARNs its
   * definition substitutes, so granting a step on its own machine through the default policy would be a
   * dependency cycle (function → policy → machine → function). Nothing depends on this policy; it is in
   * place before any execution can start, since it is created with the machines.
   *
   * The EKS runtime adapter (not built yet) will also need eks:DescribeCluster on its cluster (and a
   * Kubernetes RBAC mapping for this role); grant it here, with the cluster as a stack prop, when it lands.
   */
  bindRuntime(stateMachines: sfn.IStateMachine[]): this {
    if (stateMachines.length === 0 || !this.role) {
      throw new Error(`${this.node.path}: runtime access needs a role and the state machines`);
    }
    new iam.Policy(this, 'TaskResponse', {
      roles: [this.role],
      statements: [
        new iam.PolicyStatement({
          actions: ['states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat'],
          resources: stateMachines.map((machine) => machine.stateMachineArn),
        }),
      ],
    });
    return this;
  }

  /**
   * Grant what a manifest entry declares: its tables, the workflows it starts, secret bundles, and for
   * `runtime` the callback tasks of every state machine in `deps.stateMachines` (so bind after they exist).
   * `sourceHost` grants nothing yet: the GitHub App adapter (and its credentials) is not built.
   */
  bindAccess(
    access: RouteAccess,
    deps: { tables: Tables; stateMachines?: Partial<Record<WorkflowName, sfn.IStateMachine>> },
  ): this {
    for (const [name, mode] of Object.entries(access.tables) as [TableName, 'R' | 'RW'][]) {
      this.bindTable(deps.tables[name], mode);
    }
    for (const workflow of access.starts ?? []) {
      const machine = deps.stateMachines?.[workflow];
      if (!machine) throw new Error(`${this.node.path}: no state machine for workflow "${workflow}"`);
      this.bindWorkflow(workflow, machine);
    }
    if (access.secrets) this.bindSecrets(access.secrets);
    if (access.runtime) {
      this.bindRuntime(Object.values(deps.stateMachines ?? {}).filter((m) => m !== undefined));
    }
    return this;
  }
}
