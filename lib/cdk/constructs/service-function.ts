import { isAbsolute, join, relative } from 'node:path';
import { ArnFormat, Duration, RemovalPolicy, type Size, Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as eks from 'aws-cdk-lib/aws-eks';
import type * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import type { RouteAccess } from '../../../functions/manifest/routes.js';
import { type TableName, tableNames, tables } from '../../../functions/manifest/tables.js';
import type { WorkflowName } from '../../../functions/ports/workflows/port.js';
import {
  type AccessResources,
  artifactReadActions,
  artifactWriteActions,
  type BrowserResources,
  browserRequirements,
  type ClusterSettings,
  clusterGroup,
  type FunctionKind,
  type ImageBuildResources,
  imageBuildActions,
  logReadActions,
  type MediaResources,
  mediaPrefix,
  mediaReadActions,
  mediaWriteActions,
  publishActions,
  type SourceHostResources,
  sourcesPrefix,
  stateMachineArnEnv,
  type Tables,
  tableReadActions,
  tableWriteActions,
} from '../access.js';
import {
  aliasEsbuildArgs,
  copyModulesHooks,
  lambdaBundling,
  lambdaLayers,
  layersFor,
  moduleClosure,
  repoRoot,
} from '../bundling.js';
import { keepStackLevelIds } from '../logical-ids.js';
import { acknowledge, acknowledgeWildcardResource } from '../nag.js';
import { sharedLayer } from './shared-layers.js';

export interface ServiceFunctionProps {
  /** Handler module, relative to the repository root (as in functions/manifest/routes.ts and workflows.ts). */
  entry: string;
  kind: FunctionKind;
  /** Every table; each name is passed as its `TABLE_*` env var (access is granted separately). */
  tables: Tables;
  /** Prefix of the secret-bundle names (`<prefix>/<applicationId>/<app>`); passed as SECRET_NAME_PREFIX. */
  secretNamePrefix: string;
  /**
   * @default 28 seconds for `api` (API Gateway gives up at 29 s), 15 minutes otherwise
   */
  timeout?: Duration;
  /** @default 512 */
  memorySize?: number;
  /** @default lambda.Architecture.ARM_64 */
  architecture?: lambda.Architecture;
  /** @default - Lambda's default, 512 MiB of /tmp */
  ephemeralStorageSize?: Size;
  /**
   * Packages left out of the bundle and copied, with every package they depend on, from the repository's
   * node_modules into the function's (offline: no install at synth). For a package that must stay files
   * on disk, such as @sparticuz/chromium, whose browser binaries sit beside its code.
   * @default - none: everything is bundled
   */
  copiedModules?: readonly string[];
  /**
   * Folders (relative to the repository root) copied beside the bundle at the same paths: static files
   * the handler reads (a page's `files`, functions/manifest/routes.ts).
   * @default - none
   */
  copiedFiles?: readonly string[];
  /** @default logs.RetentionDays.ONE_MONTH */
  logRetention?: logs.RetentionDays;
  description?: string;
}

/**
 * Every Lambda of the service (route handlers, workflow steps, event targets): Node.js 22 on arm64, X-Ray
 * tracing, its own log group with a retention, an esbuild ESM bundle (minified, source maps, AWS SDK v3
 * bundled and tree-shaken rather than taken from the runtime) and the environment config.ts validates.
 * It starts with no permissions beyond writing its own log group and sending traces (its own role, no AWS
 * managed policy); the `bind*` methods grant least privilege.
 */
export class ServiceFunction extends NodejsFunction {
  readonly kind: FunctionKind;
  /** The handler module, relative to the repository root (as in the manifests). */
  readonly entry: string;
  /** The function's memory in MB (as configured). */
  readonly memorySize: number;
  private readonly secretNamePrefix: string;
  /** The GitHub App secret is granted once, whichever access kinds need it. */
  private githubAppBound = false;

  constructor(scope: Construct, id: string, props: ServiceFunctionProps) {
    const entry = isAbsolute(props.entry) ? props.entry : join(repoRoot, props.entry);
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Its logs outlive a move of the function into another construct (lib/cdk/logical-ids.ts).
    keepStackLevelIds(logGroup);
    // Its own role rather than CDK's default one, whose AWSLambdaBasicExecutionRole managed policy lets it
    // write any log group of the account: this one writes only its own.
    const role = new iam.Role(scope, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${id}`,
    });
    logGroup.grantWrite(role);
    const copiedModules = [...(props.copiedModules ?? [])];
    const copied = [
      ...(copiedModules.length > 0 ? moduleClosure(copiedModules) : []),
      ...(props.copiedFiles ?? []),
    ];
    const relativeEntry = relative(repoRoot, entry);
    // Shared layers (lib/cdk/bundling.ts `lambdaLayers`): their packages stay out of the bundle.
    const layerIds = layersFor(relativeEntry);
    const layerPackages = layerIds.flatMap((id) => lambdaLayers[id].packages);
    const memorySize = props.memorySize ?? 512;
    super(scope, id, {
      role,
      entry,
      handler: 'handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: props.architecture ?? lambda.Architecture.ARM_64,
      memorySize,
      ephemeralStorageSize: props.ephemeralStorageSize,
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
        esbuildArgs: aliasEsbuildArgs(),
        // Nothing external but the copied modules and the layers' packages: the AWS SDK v3 clients are
        // bundled and tree-shaken, pinned by our lock file.
        externalModules: [...copiedModules, ...layerPackages],
        ...(copied.length > 0 ? { commandHooks: copyModulesHooks(copied) } : {}),
      },
    });
    this.kind = props.kind;
    this.entry = relativeEntry;
    this.memorySize = memorySize;
    for (const id of layerIds) this.addLayers(sharedLayer(this, id));
    this.secretNamePrefix = props.secretNamePrefix;
    acknowledge(
      role,
      'AwsSolutions-IAM5[Resource::*]',
      'X-Ray tracing (tracing: ACTIVE): xray:PutTraceSegments and xray:PutTelemetryRecords have no resource-level ' +
        'permissions, so IAM requires Resource "*". The infra tests hold every other statement of the role to ' +
        'named resources.',
    );
    acknowledge(
      this,
      'AwsSolutions-L1',
      'Node.js 22 (maintained until April 2027) is pinned on purpose: the bundles target node22 ' +
        '(lib/cdk/bundling.ts) and the test tiers run the handlers on Node 20/22. A runtime upgrade is a change ' +
        'of its own, made with its tests, not one that a newer aws-cdk-lib makes silently.',
    );
  }

  /**
   * Read (`R`: GetItem, BatchGetItem, Query, Scan, ConditionCheckItem, DescribeTable) or read-write (`RW`:
   * also PutItem, UpdateItem, DeleteItem, BatchWriteItem) access to a table and to each of the named
   * indexes (ARNs naming each index, not `index/*`).
   */
  bindTable(table: dynamodb.ITable, mode: 'R' | 'RW', indexes: readonly string[] = []): this {
    this.addToRolePolicy(
      new iam.PolicyStatement({
        actions: mode === 'RW' ? [...tableReadActions, ...tableWriteActions] : tableReadActions,
        resources: [table.tableArn, ...indexes.map((index) => `${table.tableArn}/index/${index}`)],
      }),
    );
    return this;
  }

  /**
   * The GitHub App (the source host, PR status, the webhook signature): read its secret (GetSecretValue
   * and DescribeSecret on that one secret), and learn where it is and where the API is
   * (GITHUB_APP_SECRET_ARN, GITHUB_API_URL). Granted once, however many access kinds need it.
   */
  bindSourceHost(sourceHost: SourceHostResources): this {
    if (this.githubAppBound) return this;
    this.githubAppBound = true;
    sourceHost.secret.grantRead(this);
    this.addEnvironment('GITHUB_APP_SECRET_ARN', sourceHost.secret.secretArn);
    this.addEnvironment('GITHUB_API_URL', sourceHost.apiUrl);
    return this;
  }

  /**
   * Report an environment's status on its pull request (GitHub Deployments and the PR comment, as the
   * GitHub App): the App's secret and API URL, exactly as `bindSourceHost`.
   */
  bindPrStatus(sourceHost: SourceHostResources): this {
    return this.bindSourceHost(sourceHost);
  }

  /**
   * Put events on the service's own bus: events:PutEvents on that bus only, its name as EVENT_BUS_NAME.
   */
  bindEventBus(bus: events.IEventBus): this {
    this.addToRolePolicy(new iam.PolicyStatement({ actions: publishActions, resources: [bus.eventBusArn] }));
    this.addEnvironment('EVENT_BUS_NAME', bus.eventBusName);
    return this;
  }

  /**
   * Report links only (the merge gate's `gateLinks`): the link-signing secret (GetSecretValue,
   * DescribeSecret), RUN_LINK_SECRET_ARN naming it. No S3: a failed step's screenshot is linked at the
   * report's anchor, not by a presigned URL.
   */
  bindLinkKey(media: MediaResources): this {
    media.linkSecret.grantRead(this);
    this.addEnvironment('RUN_LINK_SECRET_ARN', media.linkSecret.secretArn);
    return this;
  }

  /**
   * Test-run media and report links. `R`: s3:GetObject on `runs/*` of the media bucket (the presigned GET
   * URLs it mints are authorized by this role) and the link-signing secret (GetSecretValue,
   * DescribeSecret), RUN_LINK_SECRET_ARN naming it; `W`: s3:PutObject and s3:AbortMultipartUpload there
   * only (screenshots, videos; the run executor); `RW` both. MEDIA_BUCKET names the bucket. No
   * ListBucket: nothing lists media.
   */
  bindMedia(media: MediaResources, mode: 'R' | 'W' | 'RW'): this {
    const objects = media.bucket.arnForObjects(`${mediaPrefix}*`);
    const reads = mode !== 'W';
    this.addToRolePolicy(
      new iam.PolicyStatement({
        actions: [...(reads ? mediaReadActions : []), ...(mode !== 'R' ? mediaWriteActions : [])],
        resources: [objects],
      }),
    );
    this.addEnvironment('MEDIA_BUCKET', media.bucket.bucketName);
    if (reads) {
      media.linkSecret.grantRead(this);
      this.addEnvironment('RUN_LINK_SECRET_ARN', media.linkSecret.secretArn);
    }
    if (this.role) {
      const what = { R: 'read: presigned GETs', W: 'write: the run executor', RW: 'read and write' }[mode];
      acknowledgeWildcardResource(
        this.role,
        objects,
        'Test-run media are keyed runs/<orgId>/<runId>/<file>, known only at run time; the grant is limited ' +
          `to that prefix of the media bucket (${what}).`,
      );
    }
    return this;
  }

  /**
   * Drive the headless browser: the function must have been built for it (x86_64, at least 2 GB; see
   * `browserRequirements`), or this throws. Adds the ffmpeg layer when there is one, and PREVIEW_FFMPEG_PATH.
   */
  bindBrowser(browser: BrowserResources): this {
    if (
      this.architecture !== browserRequirements.architecture ||
      this.memorySize < browserRequirements.minMemorySize
    ) {
      throw new Error(
        `${this.node.path}: "browser" access needs an x86_64 function with at least ` +
          `${browserRequirements.minMemorySize} MB (build it with browserFunctionProps)`,
      );
    }
    if (browser.ffmpegLayer) this.addLayers(browser.ffmpegLayer);
    this.addEnvironment('PREVIEW_FFMPEG_PATH', browser.ffmpegPath);
    return this;
  }

  /**
   * Staged source archives: objects under `sources/` of the artifacts bucket only. `R` reads them, `RW`
   * also writes them (single and multipart uploads). Both may list the bucket, so that a HeadObject of a
   * key not staged yet answers 404 (without s3:ListBucket, S3 answers 403 for a missing key). The bucket's
   * name is passed as ARTIFACTS_BUCKET.
   */
  bindArtifacts(bucket: s3.IBucket, mode: 'R' | 'RW'): this {
    const objects = bucket.arnForObjects(`${sourcesPrefix}*`);
    this.addToRolePolicy(
      new iam.PolicyStatement({
        actions: mode === 'RW' ? [...artifactReadActions, ...artifactWriteActions] : artifactReadActions,
        resources: [objects],
      }),
    );
    this.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [bucket.bucketArn] }),
    );
    this.addEnvironment('ARTIFACTS_BUCKET', bucket.bucketName);
    if (this.role) {
      acknowledgeWildcardResource(
        this.role,
        objects,
        `Source archives are keyed sources/<orgId>/<owner>/<repo>/<sha>.tar.gz, known only at run time; the ` +
          `grant is limited to that prefix of the artifacts bucket (${mode === 'RW' ? 'read and write' : 'read'}).`,
      );
    }
    return this;
  }

  /**
   * Image builds: start builds of the image-build project (StartBuild), read the images it pushed
   * (BatchGetImage on the image repository: which exist, their digests) and its log (GetLogEvents on its
   * log group): the calls codebuild/images.ts and codebuild/build-logs.ts make, nothing more (a build's outcome comes
   * from its completion event). IMAGE_BUILD_PROJECT, IMAGE_REPOSITORY_URI and IMAGE_BUILD_LOG_GROUP
   * name them. The task token is never passed to a build: CodeBuild's events echo a build's environment.
   */
  bindImageBuilds(imageBuilds: ImageBuildResources): this {
    this.addToRolePolicy(
      new iam.PolicyStatement({
        actions: imageBuildActions.project,
        resources: [imageBuilds.project.projectArn],
      }),
    );
    imageBuilds.repository.grant(this, ...imageBuildActions.repository);
    imageBuilds.logGroup.grant(this, ...imageBuildActions.logs);
    this.addEnvironment('IMAGE_BUILD_PROJECT', imageBuilds.project.projectName);
    this.addEnvironment('IMAGE_REPOSITORY_URI', imageBuilds.repository.repositoryUri);
    this.addEnvironment('IMAGE_BUILD_LOG_GROUP', imageBuilds.logGroup.logGroupName);
    return this;
  }

  /**
   * Reading apps' and builds' output (`logs` access): GetLogEvents on the image-build log group, nothing
   * else of the image build (no StartBuild, no image reads), IMAGE_BUILD_LOG_GROUP naming it, and the
   * cluster's settings (EKS_*). Calling the cluster's API (pods list, pods/log, the app's Secret
   * to mask with) is `bindClusterAccess`, which the stack gives the routes with `logs` access.
   */
  bindLogs(imageBuilds: ImageBuildResources, cluster?: ClusterSettings): this {
    imageBuilds.logGroup.grant(this, ...logReadActions);
    // The build log's group only: the logs getter (registry/runtime/app-logs.ts `appLogReader`) reads nothing else of
    // the image builds, and the cluster's CA leaves little of Lambda's 4 KB of environment.
    this.addEnvironment('IMAGE_BUILD_LOG_GROUP', imageBuilds.logGroup.logGroupName);
    if (cluster) this.bindClusterSettings(cluster);
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
      // A bundle written again after an operator deleted its secret: restored, then written.
      'secretsmanager:RestoreSecret',
    ];
    this.addToRolePolicy(
      new iam.PolicyStatement({ actions: mode === 'RW' ? [...read, ...write] : read, resources: [resource] }),
    );
    if (this.role) {
      acknowledgeWildcardResource(
        this.role,
        resource,
        'Secret bundles are named <secretNamePrefix>/<applicationId>/<app>, known only at run time; the grant is ' +
          "limited to this stage's prefix and to the calls the Secrets Manager adapter makes.",
      );
    }
    return this;
  }

  /**
   * The runtime seam (`completesTasks` access): end (or heartbeat) the callback tasks of these state
   * machines with the task token the step was given. The statement lives in its own policy, not the
   * role's default policy: a function depends on its default policy, and a state machine depends on the
   * step functions whose ARNs its definition substitutes, so granting a step on its own machine through
   * the default policy would be a dependency cycle (function → policy → machine → function). Nothing
   * depends on this policy; it is in place before any execution can start, since it is created with the
   * machines.
   *
   * What the cluster itself allows is `bindClusterAccess` (only for the functions that call its API).
   */
  bindRuntime(stateMachines: sfn.IStateMachine[]): this {
    if (stateMachines.length === 0 || !this.role) {
      throw new Error(`${this.node.path}: completesTasks access needs a role and the state machines`);
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
   * The cluster's settings, as the EKS_* variables shared/config.ts validates (`Config.eks`; the adapter is
   * built from them by `connectionOptions` of functions/ports/runtime/eks/connection.ts). For the functions with
   * `runtime` access (the cluster steps and the rollout watcher) and the app-logs route (`logs`); the image
   * builds (BuildImages, the image-build event target) never build the cluster adapter and get none.
   * Grants nothing: see `bindClusterAccess`.
   */
  bindClusterSettings(cluster: ClusterSettings): this {
    const env: Record<string, string | undefined> = {
      EKS_CLUSTER_NAME: cluster.name,
      EKS_ROUTING: cluster.routing,
      EKS_GATEWAY_NAME: cluster.gatewayName,
      EKS_GATEWAY_NAMESPACE: cluster.gatewayNamespace,
      EKS_GATEWAY_SECTION: cluster.gatewaySection,
      EKS_PROTECTION: cluster.protection,
      PREVIEW_DEFAULT_ACCESS: cluster.defaultAccess,
      EKS_INGRESS_CLASS: cluster.ingressClassName,
      EKS_INGRESS_DOMAIN: cluster.ingressDomain,
      EKS_INGRESS_NAMESPACE: cluster.ingressNamespace,
      EKS_INGRESS_ANNOTATIONS: cluster.ingressAnnotations && JSON.stringify(cluster.ingressAnnotations),
      EKS_TLS_SECRET_NAME: cluster.tlsSecretName,
      EKS_ALLOW_FROM_CIDRS: cluster.allowFromCidrs?.length ? cluster.allowFromCidrs.join(',') : undefined,
      EKS_DB_STORAGE_SIZE: cluster.dbStorageSize,
      EKS_DB_STORAGE_CLASS: cluster.dbStorageClass,
      EKS_CNPG_NAMESPACE: cluster.cnpgNamespace,
    };
    for (const [name, value] of Object.entries(env))
      if (value !== undefined) this.addEnvironment(name, value);
    return this;
  }

  /**
   * Invoke the rollout watcher (lambda:InvokeFunction on its unqualified ARN; the runtime invokes it by
   * name, asynchronously) and learn its name (ROLLOUT_WATCHER_FUNCTION). The watcher itself, which invokes
   * itself to go on watching, gets neither the variable nor a default-policy statement: a function cannot
   * name itself in its own environment, and it depends on its default policy (either would be a
   * dependency cycle). It finds its name in AWS_LAMBDA_FUNCTION_NAME, and the grant is a policy of its own
   * (as in `bindRuntime`), which nothing depends on.
   */
  bindWatcher(watcher: lambda.IFunction): this {
    const invoke = new iam.PolicyStatement({
      actions: ['lambda:InvokeFunction'],
      resources: [watcher.functionArn],
    });
    if (watcher === this) {
      if (!this.role) throw new Error(`${this.node.path}: the watcher needs a role`);
      new iam.Policy(this, 'InvokeSelf', { roles: [this.role], statements: [invoke] });
      return this;
    }
    this.addToRolePolicy(invoke);
    this.addEnvironment('ROLLOUT_WATCHER_FUNCTION', watcher.functionName);
    return this;
  }

  /**
   * Call the cluster's API: its endpoint and CA (EKS_CLUSTER_ENDPOINT, EKS_CLUSTER_CA_DATA, which the
   * stack resolved at deploy time: no EKS action is granted), and, unless the operator maps roles in the
   * aws-auth ConfigMap instead, an EKS access entry (STANDARD, no access policy) putting this function's
   * role in the Kubernetes group `preview-runtime`, whose rights are deploy/rbac.yaml's. Only for the
   * functions that talk to the cluster (deploy, teardown, the rollout watcher, the app-logs route), not
   * every runtime function: the image builds never reach it.
   */
  bindClusterAccess(cluster: ClusterSettings): this {
    if (!this.role) throw new Error(`${this.node.path}: cluster access needs a role`);
    if (!cluster.api) throw new Error(`${this.node.path}: cluster access needs the cluster's API (api)`);
    this.addEnvironment('EKS_CLUSTER_ENDPOINT', cluster.api.endpoint);
    this.addEnvironment('EKS_CLUSTER_CA_DATA', cluster.api.caData);
    if (cluster.accessEntries) {
      new eks.CfnAccessEntry(this, 'ClusterAccess', {
        clusterName: cluster.name,
        principalArn: this.role.roleArn,
        type: 'STANDARD',
        kubernetesGroups: [clusterGroup],
      });
    }
    return this;
  }

  /**
   * Grant what a manifest entry declares, by kind: its tables (and their indexes, from
   * functions/manifest/tables.ts), the workflows it starts, secret bundles, the source host and PR status
   * (the GitHub App), publishing on the service bus, test-run media, the browser, the artifacts
   * bucket, image builds, for `completesTasks` the callback tasks of every state machine in
   * `deps.stateMachines` (so bind after they exist), for `runtime` the cluster's settings, and for
   * `invokesWatcher` invoking the rollout watcher. A declared kind whose resources `deps` lacks throws.
   * Calling the cluster's API is granted apart (`bindClusterAccess`), to the functions that do.
   */
  bindAccess(access: RouteAccess, deps: AccessResources): this {
    for (const [name, mode] of Object.entries(access.tables) as [TableName, 'R' | 'RW'][]) {
      this.bindTable(
        deps.tables[name],
        mode,
        tables[name].indexes.map((index) => index.name),
      );
    }
    for (const workflow of access.starts ?? []) {
      const machine = deps.stateMachines?.[workflow];
      if (!machine) throw new Error(`${this.node.path}: no state machine for workflow "${workflow}"`);
      this.bindWorkflow(workflow, machine);
    }
    if (access.secrets) this.bindSecrets(access.secrets);
    if (access.sourceHost) this.bindSourceHost(this.required(deps.sourceHost, 'sourceHost'));
    if (access.prStatus) this.bindPrStatus(this.required(deps.sourceHost, 'prStatus'));
    if (access.publishes) this.bindEventBus(this.required(deps.eventBus, 'publishes'));
    if (access.media) this.bindMedia(this.required(deps.media, 'media'), access.media);
    // The merge gate's links: PUBLIC_URL, and the report links it signs (the link key; no media read).
    if (access.gateLinks && access.media !== 'R' && access.media !== 'RW')
      this.bindLinkKey(this.required(deps.media, 'gateLinks'));
    if (access.gateLinks && deps.publicUrl) this.addEnvironment('PUBLIC_URL', deps.publicUrl);
    if (access.browser) this.bindBrowser(this.required(deps.browser, 'browser'));
    if (access.artifacts) this.bindArtifacts(this.required(deps.artifacts, 'artifacts'), access.artifacts);
    if (access.imageBuilds) this.bindImageBuilds(this.required(deps.imageBuilds, 'imageBuilds'));
    if (access.logs) this.bindLogs(this.required(deps.imageBuilds, 'logs'), deps.runtime?.cluster);
    if (access.completesTasks)
      this.bindRuntime(Object.values(deps.stateMachines ?? {}).filter((m) => m !== undefined));
    if (access.runtime) {
      const { cluster } = this.required(deps.runtime, 'runtime');
      if (cluster) this.bindClusterSettings(cluster);
    }
    if (access.invokesWatcher) this.bindWatcher(this.required(deps.runtime, 'invokesWatcher').watcher);
    return this;
  }

  private required<T>(resources: T | undefined, kind: string): T {
    if (resources === undefined)
      throw new Error(`${this.node.path}: "${kind}" access, but no ${kind} resources`);
    return resources;
  }
}

/** A media access that also reads (mints links). */

/**
 * The props that make a function able to drive the headless browser (`browser` access): x86_64 (the only
 * architecture @sparticuz/chromium ships), `memorySize` (at least 2048 MB), room in /tmp for the unpacked
 * Chromium and the video's frames, and @sparticuz/chromium shipped as files beside the bundle.
 */
export function browserFunctionProps(settings: {
  memorySize: number;
  ephemeralStorageSize: Size;
}): Pick<ServiceFunctionProps, 'architecture' | 'memorySize' | 'ephemeralStorageSize' | 'copiedModules'> {
  if (
    !Number.isInteger(settings.memorySize) ||
    settings.memorySize < browserRequirements.minMemorySize ||
    settings.memorySize > 10240
  ) {
    throw new Error(
      `browserMemorySize must be a whole number of MB from ${browserRequirements.minMemorySize} to 10240 (got ${settings.memorySize})`,
    );
  }
  return {
    architecture: browserRequirements.architecture,
    memorySize: settings.memorySize,
    ephemeralStorageSize: settings.ephemeralStorageSize,
    copiedModules: browserRequirements.modules,
  };
}
