import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  ArnFormat,
  CfnOutput,
  Duration,
  RemovalPolicy,
  Size,
  Stack,
  type StackProps,
  Tags,
  Token,
} from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as codebuild from 'aws-cdk-lib/aws-codebuild';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import {
  type EventRuleDef,
  type EventRuleId,
  eventRules,
  type ScheduleDef,
  type ScheduleId,
  schedules,
} from '../../functions/manifest/events.js';
import {
  type PageDef,
  pages,
  type RouteAccess,
  type RouteDef,
  type RouteId,
  routeIds,
  routes,
} from '../../functions/manifest/routes.js';
import { tableNames } from '../../functions/manifest/tables.js';
import { type WorkerDef, type WorkerId, workers } from '../../functions/manifest/workers.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import {
  type AccessResources,
  ApiFunction,
  type BrowserResources,
  browserFunctionProps,
  type ClusterSettings,
  clusterArn,
  clusterDescribeActions,
  type MediaResources,
  repoRoot,
  type Tables,
} from './api-function.js';
import { ffmpegLayer, ffmpegPath } from './ffmpeg-layer.js';
import { ImageBuild, type ImageBuildArchitecture } from './image-build.js';
import { acknowledge } from './nag.js';
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
  /** The GitHub App's secret (`{"appId","privateKey","webhookSecret"}`), from the stateful stack. */
  githubAppSecret: secretsmanager.ISecret;
  /**
   * GitHub's REST API base URL, passed as GITHUB_API_URL to the functions that talk to the source host
   * (GitHub Enterprise Server: `https://<host>/api/v3`).
   * @default 'https://api.github.com'
   */
  githubApiUrl?: string;
  /** The app-image repository, from the stateful stack. */
  imageRepository: ecr.IRepository;
  /**
   * How long a staged source archive stays in the artifacts bucket (whole days). A build reads it within
   * the hour; a redeploy of the same commit after expiry stages it again.
   * @default Duration.days(7)
   */
  artifactsExpiration?: Duration;
  /**
   * The architecture image builds run on, and so the architecture of every app image. x86_64 because most
   * Dockerfiles, base images and EKS node groups assume amd64; arm64 is cheaper where every app supports it.
   * @default 'x86_64'
   */
  imageBuildArchitecture?: ImageBuildArchitecture;
  /** @default codebuild.ComputeType.SMALL */
  imageBuildComputeType?: codebuild.ComputeType;
  /**
   * How long one image build (all apps of an environment, in turn) may run. With `imageBuildQueuedTimeout`
   * it must end at least 5 minutes before the BuildImages task times out.
   * @default Duration.minutes(30)
   */
  imageBuildTimeout?: Duration;
  /** How long a build may wait for CodeBuild capacity. @default Duration.minutes(20) */
  imageBuildQueuedTimeout?: Duration;
  /**
   * The EKS cluster previews run on: its name, in this stack's account and region. Its API endpoint must be
   * reachable from Lambda (public endpoint access: the functions are not in a VPC), and its authentication
   * mode API or API_AND_CONFIG_MAP for the access entries (else `eksAccessEntries: false`).
   * Unset, the stack deploys without a cluster: images build, and a deploy fails saying that no cluster is
   * configured (a teardown has nothing to remove); the ingress settings below must then be unset too.
   * @default - no cluster
   */
  eksClusterName?: string;
  /**
   * Create an EKS access entry (Kubernetes group `preview-runtime`) for each role that calls the cluster.
   * false: the operator maps those roles (the `…RoleArn` outputs) in the aws-auth ConfigMap instead, for a
   * cluster in CONFIG_MAP authentication mode (docs/deploy-to-aws.md).
   * @default true
   */
  eksAccessEntries?: boolean;
  /** `spec.ingressClassName` of every app's Ingress (EKS_INGRESS_CLASS). @default 'nginx' */
  ingressClassName?: string;
  /**
   * The wildcard domain apps answer under (EKS_INGRESS_DOMAIN), without `*.`: an app's URL is
   * `https://<app>-<namespace>.<ingressDomain>`, so `*.<ingressDomain>` must resolve to the ingress
   * controller and its certificate must cover it. Required with `eksClusterName`.
   * @default - none (required with a cluster)
   */
  ingressDomain?: string;
  /**
   * The ingress controller's namespace (EKS_INGRESS_NAMESPACE): each preview namespace's NetworkPolicy
   * admits traffic from it (and from the namespace's own pods, and `allowFromCidrs`), nothing else.
   * @default 'ingress-nginx'
   */
  ingressNamespace?: string;
  /**
   * Extra annotations on every Ingress (EKS_INGRESS_ANNOTATIONS, as JSON), e.g. an ALB's scheme, group and
   * certificate ARN. @default - none
   */
  ingressAnnotations?: Record<string, string>;
  /**
   * The TLS Secret named in every Ingress (EKS_TLS_SECRET_NAME). It must exist in each preview namespace,
   * which the runtime does not do; leave it unset to serve the controller's default (wildcard) certificate.
   * @default - none: the ingress controller's default certificate
   */
  tlsSecretName?: string;
  /**
   * CIDRs each preview namespace's NetworkPolicy also admits (EKS_ALLOW_FROM_CIDRS): an ALB in IP target
   * mode connects from the VPC's addresses, not from a pod of the ingress namespace. @default - none
   */
  allowFromCidrs?: string[];
  /**
   * How long test-run media (screenshots, videos) stay in the media bucket (whole days). A run read after
   * that still lists its steps; its media URLs then answer 404.
   * @default Duration.days(30)
   */
  mediaExpiration?: Duration;
  /**
   * Memory of the function that drives the headless browser (the testRun Execute step), in MB: at least
   * 2048 (Chromium), at most 10240. More memory is also more CPU, so faster pages and video encoding.
   * @default 2048
   */
  browserMemorySize?: number;
  /**
   * /tmp of the browser function: Chromium unpacks there (about 300 MB), and the video's frames are
   * written there before ffmpeg encodes them.
   * @default Size.gibibytes(2)
   */
  browserEphemeralStorageSize?: Size;
  /**
   * The complete ARN, with its version, of an existing x86_64 Lambda layer that holds ffmpeg at
   * `bin/ffmpeg` (so at /opt/bin/ffmpeg), in place of the packaged one (lib/cdk/ffmpeg-layer.ts).
   * @default - a layer of the static ffmpeg that @ffmpeg-installer/linux-x64 carries
   */
  ffmpegLayerArn?: string;
  /**
   * A local directory (or .zip) with an x86_64 ffmpeg at `bin/ffmpeg`, published as a layer of this stack
   * in place of the packaged one. Exclusive with `ffmpegLayerArn`.
   * @default - a layer of the static ffmpeg that @ffmpeg-installer/linux-x64 carries
   */
  ffmpegLayerPath?: string;
}

/** EKS cluster names: 1-100 characters, alphanumeric first, then alphanumerics, `-` and `_`. */
const clusterNamePattern = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;
/** A DNS name of lower-case labels (no wildcard, no trailing dot). */
const domainPattern =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;
/** A Kubernetes object name (DNS subdomain, RFC 1123). */
const subdomainPattern = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A Kubernetes namespace name (DNS label, RFC 1123). */
const labelPattern = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const ipv4Cidr = /^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)\/(3[0-2]|[12]?\d)$/;
const maxAnnotationsJson = 1024;
const ipv6Cidr = /^[0-9a-fA-F:]*:[0-9a-fA-F:.]*\/(12[0-8]|1[01]\d|[1-9]?\d)$/;

/**
 * The step entries whose functions call the cluster's API (deploy, restart, prune; teardown): with the
 * workers, the only roles granted eks:DescribeCluster and an access entry. They are the steps whose
 * manifest entry declares `runtime` (the cluster's settings), which an infra test holds them to.
 */
export const clusterStepEntries = ['functions/steps/deploy-apps.ts', 'functions/steps/tear-down.ts'];
/** The routes that call the cluster's API: those with `logs` access (an app's pods' logs). */
export const clusterRouteIds = routeIds.filter((id) => (routes[id].access as RouteAccess).logs);

/**
 * The cluster settings from the stack props (defaults applied, each value checked), or undefined without
 * a cluster. Tokens (deploy-time values) are not checked.
 */
export function clusterSettings(props: StatelessStackProps): ClusterSettings | undefined {
  const check = (name: string, value: string | undefined, pattern: RegExp, what: string) => {
    if (value !== undefined && !Token.isUnresolved(value) && !pattern.test(value))
      throw new Error(`${name} must be ${what} (got "${value}")`);
  };
  const name = props.eksClusterName;
  if (name === undefined) {
    const set = (
      [
        'eksAccessEntries',
        'ingressClassName',
        'ingressDomain',
        'ingressNamespace',
        'ingressAnnotations',
        'tlsSecretName',
        'allowFromCidrs',
      ] as const
    ).filter((key) => props[key] !== undefined);
    if (set.length > 0) throw new Error(`${set.join(', ')} set without eksClusterName`);
    return undefined;
  }
  check('eksClusterName', name, clusterNamePattern, 'an EKS cluster name');
  const domain = props.ingressDomain;
  if (domain === undefined) throw new Error('ingressDomain is required with eksClusterName');
  if (!Token.isUnresolved(domain) && domain.startsWith('*.'))
    throw new Error(`ingressDomain is the domain under the wildcard, without "*." (got "${domain}")`);
  check('ingressDomain', domain, domainPattern, 'a lower-case DNS name (previews.example.com)');
  const ingressClassName = props.ingressClassName ?? 'nginx';
  check('ingressClassName', ingressClassName, subdomainPattern, 'a Kubernetes object name');
  const ingressNamespace = props.ingressNamespace ?? 'ingress-nginx';
  check('ingressNamespace', ingressNamespace, labelPattern, 'a Kubernetes namespace name');
  check('tlsSecretName', props.tlsSecretName, subdomainPattern, 'a Kubernetes object name');
  for (const [key, value] of Object.entries(props.ingressAnnotations ?? {})) {
    if (typeof value !== 'string') throw new Error(`ingressAnnotations.${key} must be a string`);
  }
  // A function's whole environment must fit Lambda's 4 KB; the annotations may take a quarter of it.
  const annotationsJson = JSON.stringify(props.ingressAnnotations ?? {});
  if (!Token.isUnresolved(annotationsJson) && annotationsJson.length > maxAnnotationsJson)
    throw new Error(
      `ingressAnnotations: at most ${maxAnnotationsJson} characters of JSON (Lambda's environment is 4 KB)`,
    );
  for (const cidr of props.allowFromCidrs ?? []) {
    if (!Token.isUnresolved(cidr) && !ipv4Cidr.test(cidr) && !ipv6Cidr.test(cidr))
      throw new Error(`allowFromCidrs: "${cidr}" is not a CIDR block (10.0.0.0/16)`);
  }
  return {
    name,
    accessEntries: props.eksAccessEntries ?? true,
    ingressClassName,
    ingressDomain: domain,
    ingressNamespace,
    ingressAnnotations: props.ingressAnnotations,
    tlsSecretName: props.tlsSecretName,
    allowFromCidrs: props.allowFromCidrs,
  };
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
 * Delivery of a rule's events to its target (EventBridge's retry policy; what it still cannot deliver goes
 * to the rule's delivery DLQ). An hour, because the task an image-build event ends has timed out by then.
 */
export const eventDelivery = { retryAttempts: 24, maxEventAge: Duration.hours(1) };
/**
 * Lambda's own handling of an asynchronous invocation (EventBridge invokes targets asynchronously): a
 * function error is retried twice, then the event goes to the function's on-failure destination.
 */
export const eventInvocation = { retryAttempts: 2, maxEventAge: Duration.hours(1) };
/**
 * Lambda's handling of a worker's asynchronous invocation (the runtime and the watcher itself invoke it):
 * a function error is retried twice, then the event goes to the worker's on-failure queue. Half an hour:
 * the longest a DeployApps task waits for the watcher (its TimeoutSeconds, 1800 s); an older event ends
 * no task. (The watcher's own deadline, 20 minutes after the rollout started, comes first anyway.)
 */
export const workerInvocation = { retryAttempts: 2, maxEventAge: Duration.minutes(30) };
/**
 * Delivery of a schedule's events to its target, and Lambda's handling of the asynchronous invocation:
 * each within one period of the schedule, after which the next run has superseded the missed one.
 */
export const scheduleRetries = { delivery: 24, invocation: 2 };
/** A scheduled target's Lambda timeout (it must end well within its schedule's period). */
export const scheduleTargetTimeout = Duration.minutes(5);
export { ffmpegPath };

/**
 * The period of a `rate(...)` schedule expression; undefined for a `cron(...)` one.
 */
export function ratePeriod(expression: string): Duration | undefined {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (!match) {
    if (/^cron\(.+\)$/.test(expression)) return undefined;
    throw new Error(`schedule "${expression}" is neither rate(...) nor cron(...)`);
  }
  const n = Number(match[1]);
  const unit = match[2]!;
  return unit.startsWith('minute')
    ? Duration.minutes(n)
    : unit.startsWith('hour')
      ? Duration.hours(n)
      : Duration.days(n);
}

/**
 * How long a scheduled event stays worth delivering or retrying: one period of its schedule (the next run
 * supersedes it), at least EventBridge's minimum (1 minute), at most an hour (for a cron schedule too).
 */
export function scheduleEventAge(def: ScheduleDef): Duration {
  const period = ratePeriod(def.schedule)?.toSeconds() ?? 3600;
  return Duration.seconds(Math.max(60, Math.min(period, 3600)));
}

/** A build (its queue time included) must end this long before the BuildImages task times out. */
const imageBuildMarginSeconds = 5 * 60;

/**
 * The stateless stack: everything that can be destroyed and recreated without losing data (its buckets and
 * the run-link secret are retained). Reads top to bottom: the alarm topic (every failure queue's alarm
 * notifies it), (0) artifacts bucket and image build, the service event bus, the media bucket, the run-link
 * secret and the ffmpeg layer, (1) step functions (the browser one on x86_64) and workers, (2) state
 * machines (then the steps' and workers' grants, and the cluster access of those that call it), (3) route
 * functions, (4) event rules (default bus and service bus) and schedules, (5) REST API, (6) outputs. Routes,
 * workflows, event rules, schedules and workers come from the manifests
 * (functions/manifest/{routes,workflows,events,workers}.ts) the local server also runs, so the cloud and
 * local APIs cannot drift. With `eksClusterName`, the runtime functions get the cluster's settings, and the
 * roles that call it an EKS access entry (Kubernetes group `preview-runtime`, whose rights are
 * deploy/rbac.yaml).
 */
export class StatelessStack extends Stack {
  /** Staged source archives (`sources/<orgId>/<owner>/<repo>/<sha>.tar.gz`), expiring. */
  readonly artifacts: s3.Bucket;
  readonly imageBuild: ImageBuild;
  /** One function per unique step entry, by entry path. */
  readonly stepFunctions = new Map<string, ApiFunction>();
  readonly stateMachines: Record<WorkflowName, sfn.StateMachine>;
  readonly routeFunctions: Record<RouteId, ApiFunction>;
  /** Per event rule: the rule, its target function and the queues its failures end in. */
  readonly eventRules: Record<EventRuleId, EventRuleResources>;
  /** Per schedule (functions/manifest/events.ts `schedules`): its scheduled rule, function and queues. */
  readonly schedules: Record<ScheduleId, EventRuleResources>;
  /**
   * The service's own event bus: GitHub webhooks become events on it, and any system of the account may
   * put the documented custom events; only this account may put events on it.
   */
  readonly eventBus: events.EventBus;
  /** Test-run screenshots and videos (`runs/<orgId>/<runId>/…`), expiring. */
  readonly media: s3.Bucket;
  /** The random key report links are signed with. */
  readonly runLinkSecret: secretsmanager.Secret;
  /** The ffmpeg layer test runs record their video with (the operator's, else the packaged build). */
  readonly ffmpegLayer: lambda.ILayerVersion;
  /** Per worker (functions/manifest/workers.ts): its function and the queue its failed invocations end in. */
  readonly workers: Record<WorkerId, WorkerResources>;
  /** The EKS cluster and ingress settings, or undefined when the stack has no cluster. */
  readonly cluster?: ClusterSettings;
  /**
   * Where operational alarms notify (output `AlarmTopicArn`; operators subscribe to it): every failure
   * queue's alarm (`failureQueue`) publishes here.
   */
  readonly alarmTopic: sns.Topic;
  readonly api: apigateway.RestApi;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { tables, secretNamePrefix } = props;
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const githubApiUrl = props.githubApiUrl ?? 'https://api.github.com';
    if (!Token.isUnresolved(githubApiUrl) && !/^https:\/\/[^\s/]+/.test(githubApiUrl)) {
      throw new Error(`githubApiUrl must be an https URL (got "${githubApiUrl}")`);
    }
    const cluster = clusterSettings(props);
    this.cluster = cluster && { ...cluster, api: clusterApi(this, cluster.name) };
    // The topic every failure queue's alarm notifies (before the first queue, in 1).
    this.alarmTopic = alarmTopic(this);

    // 0. Artifacts bucket and image build (steps and event targets are granted on them by their access).
    this.artifacts = artifactsBucket(this, props.artifactsExpiration ?? Duration.days(7));
    const imageBuildTimeout = props.imageBuildTimeout ?? Duration.minutes(30);
    const imageBuildQueuedTimeout = props.imageBuildQueuedTimeout ?? Duration.minutes(20);
    const waitSeconds = imageBuildWaitSeconds();
    if (
      imageBuildTimeout.toSeconds() + imageBuildQueuedTimeout.toSeconds() >
      waitSeconds - imageBuildMarginSeconds
    ) {
      throw new Error(
        `imageBuildTimeout + imageBuildQueuedTimeout must end ${imageBuildMarginSeconds / 60} minutes before ` +
          `the BuildImages task times out (${waitSeconds / 60} minutes)`,
      );
    }
    this.imageBuild = new ImageBuild(this, 'ImageBuild', {
      artifacts: this.artifacts,
      repository: props.imageRepository,
      architecture: props.imageBuildArchitecture,
      computeType: props.imageBuildComputeType,
      timeout: imageBuildTimeout,
      queuedTimeout: imageBuildQueuedTimeout,
      logRetention,
    });
    // The service's event bus, test-run media, the report-link key and the browser's ffmpeg.
    this.eventBus = serviceEventBus(this);
    this.media = mediaBucket(this, props.mediaExpiration ?? Duration.days(30));
    this.runLinkSecret = runLinkSecret(this);
    this.ffmpegLayer = ffmpegLayer(this, props);
    const media: MediaResources = { bucket: this.media, linkSecret: this.runLinkSecret };
    const browser: BrowserResources = { ffmpegPath, ffmpegLayer: this.ffmpegLayer };
    const browserProps = browserFunctionProps({
      memorySize: props.browserMemorySize ?? 2048,
      ephemeralStorageSize: props.browserEphemeralStorageSize ?? Size.gibibytes(2),
    });
    const shapeFor = (access: RouteAccess) => (access.browser ? browserProps : {});
    const sourceHost = { secret: props.githubAppSecret, apiUrl: githubApiUrl };
    const resources = (): AccessResources => ({
      tables,
      stateMachines: this.stateMachines,
      sourceHost,
      eventBus: this.eventBus,
      media,
      browser,
      artifacts: this.artifacts,
      imageBuilds: this.imageBuild,
      runtime: { cluster: this.cluster, watcher: this.workers.rolloutWatcher.function },
    });

    // 1. Step functions: one per unique step entry (granted in 2, once the state machines exist).
    const timeouts = stepTimeouts();
    const stepAccess = stepAccessByEntry();
    for (const [entry, access] of stepAccess) {
      const fn = new ApiFunction(this, `${pascal(camel(basename(entry, '.ts')))}Step`, {
        ...shapeFor(access),
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
    // Workers: one per manifest entry (granted in 2 too: the runtime ones end the machines' tasks).
    this.workers = {} as Record<WorkerId, WorkerResources>;
    for (const workerId of Object.keys(workers) as WorkerId[]) {
      this.workers[workerId] = this.worker(workerId, workers[workerId], {
        tables,
        secretNamePrefix,
        logRetention,
      });
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
      this.stateMachines[name] = machine;
    }
    // Each step gets what its manifest entries declare; `runtime` steps may end the machines' callback tasks.
    for (const [entry, access] of stepAccess) {
      this.step(entry).bindAccess(access, resources());
    }
    for (const workerId of Object.keys(workers) as WorkerId[]) {
      this.workers[workerId].function.bindAccess(workers[workerId].access as RouteAccess, resources());
    }
    // Only the functions that call the cluster's API may reach it (DescribeCluster, an access entry).
    if (this.cluster) {
      for (const entry of clusterStepEntries) this.step(entry).bindClusterAccess(this.cluster);
      for (const workerId of Object.keys(workers) as WorkerId[]) {
        this.workers[workerId].function.bindClusterAccess(this.cluster);
      }
    }

    // 3. Route functions: one per route; tenancy is readable by all (authentication), the rest per route.
    this.routeFunctions = {} as Record<RouteId, ApiFunction>;
    for (const routeId of routeIds) {
      const route: RouteDef = routes[routeId];
      const fn = new ApiFunction(this, `${pascal(routeId)}Route`, {
        ...shapeFor(route.access),
        entry: route.entry,
        kind: 'api',
        tables,
        secretNamePrefix,
        logRetention,
        description: `${route.method} ${route.path}`,
      }).bindAccess({ ...route.access, tables: { tenancy: 'R', ...route.access.tables } }, resources());
      // A GitHub webhook is authenticated by its signature, under the App secret's webhookSecret.
      if (route.auth === 'githubWebhook') fn.bindSourceHost(sourceHost);
      // Reading pods' logs calls the cluster's API (DescribeCluster, an access entry).
      if (this.cluster && clusterRouteIds.includes(routeId)) fn.bindClusterAccess(this.cluster);
      Tags.of(fn).add('preview:route', routeId);
      this.routeFunctions[routeId] = fn;
    }
    // Pages (HTML behind a signed, expiring link; the handler checks it): a function each, like a route.
    const pageFunctions = new Map<string, ApiFunction>();
    for (const [pageId, page] of Object.entries(pages) as [string, PageDef][]) {
      const fn = new ApiFunction(this, `${pascal(pageId)}Page`, {
        ...shapeFor(page.access),
        entry: page.entry,
        kind: 'api',
        tables,
        secretNamePrefix,
        logRetention,
        description: `${page.method} ${page.path}`,
      }).bindAccess(page.access, resources());
      Tags.of(fn).add('preview:page', pageId);
      pageFunctions.set(pageId, fn);
    }

    // 4. Event rules: a rule per manifest entry, its target a function granted from the entry's access.
    // Rules of the default bus (AWS service events) and of the service's own bus (GitHub, custom events).
    this.eventRules = {} as Record<EventRuleId, EventRuleResources>;
    for (const ruleId of Object.keys(eventRules) as EventRuleId[]) {
      this.eventRules[ruleId] = this.eventRule(ruleId, eventRules[ruleId], {
        tables,
        secretNamePrefix,
        logRetention,
        resources: resources(),
        shapeFor,
      });
    }
    // Schedules: a scheduled rule each (the expiry sweep), with the same two failure queues.
    this.schedules = {} as Record<ScheduleId, EventRuleResources>;
    for (const scheduleId of Object.keys(schedules) as ScheduleId[]) {
      this.schedules[scheduleId] = this.schedule(scheduleId, schedules[scheduleId], {
        tables,
        secretNamePrefix,
        logRetention,
        resources: resources(),
        shapeFor,
      });
    }
    // A schedule that calls the cluster (the expiry sweep: stale teardown fences) may reach it too.
    if (this.cluster) for (const [, fn] of this.clusterSchedules()) fn.bindClusterAccess(this.cluster);

    // 5. REST API: one resource tree for every route group; authentication happens in the handlers.
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
    for (const [pageId, page] of Object.entries(pages) as [string, PageDef][]) {
      this.api.root
        .resourceForPath(page.path)
        .addMethod(
          page.method,
          new apigateway.LambdaIntegration(pageFunctions.get(pageId)!, { allowTestInvoke: false }),
          { authorizationType: apigateway.AuthorizationType.NONE },
        );
    }
    addErrorResponses(this.api);
    acknowledgeApiFindings(this.api);

    // 6. Outputs.
    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'Base URL of the API' });
    for (const name of tableNames) {
      new CfnOutput(this, `${pascal(name)}TableName`, { value: tables[name].tableName });
    }
    for (const name of workflowNames) {
      new CfnOutput(this, `${pascal(name)}StateMachineArn`, {
        value: this.stateMachines[name].stateMachineArn,
      });
    }
    new CfnOutput(this, 'ArtifactsBucketName', { value: this.artifacts.bucketName });
    new CfnOutput(this, 'AlarmTopicArn', {
      value: this.alarmTopic.topicArn,
      description: 'Operational alarms (a message in any failure queue): subscribe to be notified',
    });
    new CfnOutput(this, 'EventBusName', {
      value: this.eventBus.eventBusName,
      description: 'The service bus: put Preview Redeploy Requested events here (source preview.redeploy)',
    });
    new CfnOutput(this, 'EventBusArn', { value: this.eventBus.eventBusArn });
    new CfnOutput(this, 'MediaBucketName', {
      value: this.media.bucketName,
      description: 'Test-run screenshots and videos (runs/<orgId>/<runId>/...)',
    });
    new CfnOutput(this, 'RunLinkSecretArn', {
      value: this.runLinkSecret.secretArn,
      description: 'The key run-report links are signed with (a new random value invalidates every link)',
    });
    for (const [entry, fn] of this.stepFunctions) {
      if (!stepAccess.get(entry)?.browser) continue;
      new CfnOutput(this, `${pascal(camel(basename(entry, '.ts')))}FunctionName`, {
        value: fn.functionName,
        description: 'The function that drives the headless browser (test runs)',
      });
    }
    new CfnOutput(this, 'ImageBuildProjectName', { value: this.imageBuild.project.projectName });
    new CfnOutput(this, 'ImageBuildLogGroupName', { value: this.imageBuild.logGroup.logGroupName });
    for (const ruleId of Object.keys(this.eventRules) as EventRuleId[]) {
      const { deliveryDlq, failureDlq } = this.eventRules[ruleId];
      new CfnOutput(this, `${pascal(ruleId)}DeliveryDlqUrl`, {
        value: deliveryDlq.queueUrl,
        description: `Events the ${ruleId} rule could not deliver to its function`,
      });
      new CfnOutput(this, `${pascal(ruleId)}FailureDlqUrl`, {
        value: failureDlq.queueUrl,
        description: `Events the ${ruleId} function failed on, after Lambda's retries`,
      });
    }
    for (const scheduleId of Object.keys(this.schedules) as ScheduleId[]) {
      const { rule, deliveryDlq, failureDlq } = this.schedules[scheduleId];
      new CfnOutput(this, `${pascal(scheduleId)}RuleName`, { value: rule.ruleName });
      new CfnOutput(this, `${pascal(scheduleId)}DeliveryDlqUrl`, {
        value: deliveryDlq.queueUrl,
        description: `Runs of the ${scheduleId} schedule that could not be delivered to its function`,
      });
      new CfnOutput(this, `${pascal(scheduleId)}FailureDlqUrl`, {
        value: failureDlq.queueUrl,
        description: `Runs of the ${scheduleId} schedule its function failed on, after Lambda's retries`,
      });
    }
    for (const workerId of Object.keys(this.workers) as WorkerId[]) {
      const { function: fn, failureDlq } = this.workers[workerId];
      new CfnOutput(this, `${pascal(workerId)}FunctionName`, { value: fn.functionName });
      new CfnOutput(this, `${pascal(workerId)}FailureDlqUrl`, {
        value: failureDlq.queueUrl,
        description: `Invocations of the ${workerId} worker that failed, after Lambda's retries`,
      });
    }
    // The roles that call the cluster: what its access entries name, or what aws-auth must map.
    for (const [id, fn] of this.clusterCallers()) {
      new CfnOutput(this, `${id}RoleArn`, {
        value: fn.role!.roleArn,
        description: 'A role that calls the EKS cluster (Kubernetes group preview-runtime)',
      });
    }
  }

  /**
   * The functions that call the cluster's API (`clusterStepEntries`, `clusterRouteIds` and the workers), by
   * output id. They
   * exist, and are listed, with or without a cluster.
   */
  clusterCallers(): [string, ApiFunction][] {
    return [
      ...clusterStepEntries.map((entry): [string, ApiFunction] => [
        `${pascal(camel(basename(entry, '.ts')))}Step`,
        this.step(entry),
      ]),
      ...clusterRouteIds.map((id): [string, ApiFunction] => [`${pascal(id)}Route`, this.routeFunctions[id]]),
      ...(Object.keys(this.workers) as WorkerId[]).map((id): [string, ApiFunction] => [
        pascal(id),
        this.workers[id].function,
      ]),
      ...this.clusterSchedules(),
    ];
  }

  /** The schedules' functions with `runtime` access (they call the cluster), by output id. */
  private clusterSchedules(): [string, ApiFunction][] {
    return (Object.keys(schedules) as ScheduleId[])
      .filter((id) => (schedules[id].target.access as RouteAccess).runtime)
      .map((id): [string, ApiFunction] => [`${pascal(id)}Schedule`, this.schedules[id].function]);
  }

  /**
   * One worker: an ApiFunction (kind `worker`, the manifest's timeout) invoked asynchronously by the
   * service, so Lambda retries a failed invocation twice and then sends it to the worker's on-failure
   * queue (encrypted, TLS only, 14 days). Granted from its access once the state machines exist.
   */
  private worker(
    workerId: WorkerId,
    def: WorkerDef,
    deps: { tables: Tables; secretNamePrefix: string; logRetention: logs.RetentionDays },
  ): WorkerResources {
    const id = pascal(workerId);
    if (def.timeoutSeconds > lambdaMaxSeconds)
      throw new Error(`worker ${workerId}: timeoutSeconds above Lambda's ${lambdaMaxSeconds}`);
    const fn = new ApiFunction(this, id, {
      entry: def.entry,
      kind: 'worker',
      tables: deps.tables,
      secretNamePrefix: deps.secretNamePrefix,
      logRetention: deps.logRetention,
      description: def.description,
      timeout: Duration.seconds(def.timeoutSeconds),
    });
    Tags.of(fn).add('preview:worker', workerId);
    const failureDlq = failureQueue(this, `${id}FailureDlq`, this.alarmTopic, {
      holds: `Invocations of the ${workerId} worker that failed, after Lambda's retries`,
      message: invocationRecord,
      action:
        'Replaying is pointless: the task it was to end has already failed on its missed heartbeat. Fix ' +
        'the cause, redeploy the environment, then delete the message.',
    });
    fn.configureAsyncInvoke({
      ...workerInvocation,
      onFailure: new destinations.SqsDestination(failureDlq),
    });
    return { function: fn, failureDlq };
  }

  /**
   * One event rule: on its bus (`default`: the account's default bus, AWS service events; `service`: the
   * service's own bus), its manifest pattern (plus the stack's own image-build project when
   * `ownImageBuildProject`), and its target, an ApiFunction granted from the entry's access. Two queues
   * catch what fails, because EventBridge invokes a Lambda asynchronously: the target's dead-letter queue
   * gets the events EventBridge could not deliver (after its retry policy: permissions, throttling, a
   * deleted function), and the function's on-failure destination gets the events the function itself
   * failed on, after Lambda's two retries. A function error never reaches the rule's DLQ.
   */
  private eventRule(ruleId: EventRuleId, def: EventRuleDef, deps: TargetDeps): EventRuleResources {
    const detail = def.ownImageBuildProject
      ? { ...def.pattern.detail, 'project-name': [this.imageBuild.project.projectName] }
      : def.pattern.detail;
    return this.ruleWithTarget(
      pascal(ruleId),
      def.target,
      {
        description: def.description,
        eventBus: def.bus === 'service' ? this.eventBus : undefined,
        eventPattern: {
          source: [...def.pattern.source],
          detailType: [...def.pattern['detail-type']],
          ...(detail ? { detail } : {}),
        },
      },
      {
        tag: ['preview:event', ruleId],
        description: `Target of the ${ruleId} event rule`,
        timeout: Duration.seconds(60),
        delivery: eventDelivery,
        invocation: eventInvocation,
      },
      deps,
      (fn) => ({
        delivery: {
          holds: `Events the ${ruleId} rule could not deliver to its function`,
          message: deliveredEvent,
          action: `${fixDelivery}, then ${replay(fn, 'message body')}.`,
        },
        failure: {
          holds: `Events the ${ruleId} function failed on, after Lambda's retries`,
          message: invocationRecord,
          action: `Fix the function (or what it calls), then ${replay(fn, 'its requestPayload')}.`,
        },
      }),
    );
  }

  /**
   * One schedule: a scheduled EventBridge rule (on the default bus, where schedules live) rather than an
   * EventBridge Scheduler schedule. For one fixed rate the two deliver alike (asynchronously, with a
   * retry policy and a dead-letter queue), and the rule reuses the event rules' path: the invoke
   * permission is the function's resource policy scoped to the rule's ARN, with no extra execution role,
   * and the same two failure queues. Retries stop after one period of the schedule (the next run
   * supersedes a missed one), and the function must end within the period.
   */
  private schedule(scheduleId: ScheduleId, def: ScheduleDef, deps: TargetDeps): EventRuleResources {
    const age = scheduleEventAge(def);
    const period = ratePeriod(def.schedule);
    if (period && scheduleTargetTimeout.toSeconds() >= period.toSeconds())
      throw new Error(`schedule ${scheduleId}: ${def.schedule} is shorter than its function's timeout`);
    return this.ruleWithTarget(
      pascal(scheduleId),
      def.target,
      { description: def.description, schedule: events.Schedule.expression(def.schedule) },
      {
        tag: ['preview:schedule', scheduleId],
        description: `Target of the ${scheduleId} schedule (${def.schedule})`,
        timeout: scheduleTargetTimeout,
        delivery: { retryAttempts: scheduleRetries.delivery, maxEventAge: age },
        invocation: { retryAttempts: scheduleRetries.invocation, maxEventAge: age },
      },
      deps,
      () => ({
        delivery: {
          holds: `Runs of the ${scheduleId} schedule that could not be delivered to its function`,
          message: deliveredEvent,
          action: `${supersededRun} ${fixDelivery}, then delete the message.`,
        },
        failure: {
          holds: `Runs of the ${scheduleId} schedule its function failed on, after Lambda's retries`,
          message: invocationRecord,
          action: `${supersededRun} Fix the function (or what it calls), then delete the message.`,
        },
      }),
    );
  }

  /**
   * A rule, its target function (granted from `target.access`), the delivery DLQ and the failure DLQ (each
   * with its alarm: `queues` says what lands in each and what an operator does about it).
   */
  private ruleWithTarget(
    id: string,
    target: EventRuleDef['target'],
    ruleProps: events.RuleProps,
    fnProps: {
      tag: [string, string];
      description: string;
      timeout: Duration;
      delivery: { retryAttempts: number; maxEventAge: Duration };
      invocation: { retryAttempts: number; maxEventAge: Duration };
    },
    deps: TargetDeps,
    queues: (fn: ApiFunction) => { delivery: FailureQueueSpec; failure: FailureQueueSpec },
  ): EventRuleResources {
    const access = target.access as RouteAccess;
    const fn = new ApiFunction(this, `${id}Target`, {
      ...deps.shapeFor(access),
      entry: target.entry,
      kind: 'event',
      tables: deps.tables,
      secretNamePrefix: deps.secretNamePrefix,
      logRetention: deps.logRetention,
      description: fnProps.description,
      timeout: fnProps.timeout,
    }).bindAccess(access, deps.resources);
    Tags.of(fn).add(...fnProps.tag);
    const specs = queues(fn);
    const deliveryDlq = failureQueue(this, `${id}DeliveryDlq`, this.alarmTopic, specs.delivery);
    const failureDlq = failureQueue(this, `${id}FailureDlq`, this.alarmTopic, specs.failure);
    fn.configureAsyncInvoke({
      ...fnProps.invocation,
      onFailure: new destinations.SqsDestination(failureDlq),
    });
    const rule = new events.Rule(this, `${id}Rule`, {
      ...ruleProps,
      targets: [new targets.LambdaFunction(fn, { ...fnProps.delivery, deadLetterQueue: deliveryDlq })],
    });
    return { rule, function: fn, deliveryDlq, failureDlq };
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

/** What building an event or schedule target needs. */
interface TargetDeps {
  tables: Tables;
  secretNamePrefix: string;
  logRetention: logs.RetentionDays;
  resources: AccessResources;
  /** Extra function props an access implies (the browser's). */
  shapeFor: (access: RouteAccess) => Partial<ApiFunctionShape>;
}
type ApiFunctionShape = ReturnType<typeof browserFunctionProps>;

/** An event rule (or a schedule) of the manifest, as built. */
export interface EventRuleResources {
  rule: events.Rule;
  function: ApiFunction;
  /** The rule target's dead-letter queue: events EventBridge could not deliver to the function. */
  deliveryDlq: sqs.Queue;
  /** The function's on-failure destination: events it failed on after Lambda's retries. */
  failureDlq: sqs.Queue;
}

/** A worker of the manifest, as built. */
export interface WorkerResources {
  function: ApiFunction;
  /** Its on-failure destination: invocations it failed on after Lambda's retries. */
  failureDlq: sqs.Queue;
}

/**
 * Each step entry once, with the union of what every workflow declares for it (each table and mode at its
 * widest, every flag, every workflow it starts).
 */
function stepAccessByEntry(): Map<string, RouteAccess> {
  const byEntry = new Map<string, RouteAccess>();
  for (const name of workflowNames) {
    for (const task of Object.values(workflows[name].tasks) as TaskDef[]) {
      const merged: RouteAccess = byEntry.get(task.entry) ?? { tables: {} };
      for (const [table, mode] of Object.entries(task.access.tables) as [keyof Tables, 'R' | 'RW'][]) {
        if (merged.tables[table] !== 'RW') merged.tables[table] = mode;
      }
      if (task.access.secrets && merged.secrets !== 'RW') merged.secrets = task.access.secrets;
      if (task.access.artifacts && merged.artifacts !== 'RW') merged.artifacts = task.access.artifacts;
      // Media modes combine: R and W make RW.
      if (task.access.media)
        merged.media = merged.media && merged.media !== task.access.media ? 'RW' : task.access.media;
      if (task.access.sourceHost) merged.sourceHost = true;
      if (task.access.imageBuilds) merged.imageBuilds = true;
      if (task.access.runtime) merged.runtime = true;
      if (task.access.invokesWatcher) merged.invokesWatcher = true;
      if (task.access.completesTasks) merged.completesTasks = true;
      if (task.access.publishes) merged.publishes = true;
      if (task.access.prStatus) merged.prStatus = true;
      if (task.access.browser) merged.browser = true;
      const starts = (task.access as RouteAccess).starts ?? [];
      if (starts.length > 0) merged.starts = [...new Set([...(merged.starts ?? []), ...starts])];
      byEntry.set(task.entry, merged);
    }
  }
  return byEntry;
}

/**
 * How long the state machines wait for an image build: the shortest TimeoutSeconds of the callback tasks
 * whose step declares `imageBuilds`.
 */
export function imageBuildWaitSeconds(): number {
  let shortest = Number.POSITIVE_INFINITY;
  const visit = (node: unknown, tasks: Record<string, TaskDef>): void => {
    if (Array.isArray(node)) for (const child of node) visit(child, tasks);
    if (!node || typeof node !== 'object') return;
    const target = taskTarget(node);
    const timeout = (node as { TimeoutSeconds?: unknown }).TimeoutSeconds;
    if (target?.callback && tasks[target.placeholder]?.access.imageBuilds && typeof timeout === 'number') {
      shortest = Math.min(shortest, timeout);
    }
    for (const child of Object.values(node)) visit(child, tasks);
  };
  for (const name of workflowNames) {
    const workflow = workflows[name];
    visit(JSON.parse(readFileSync(join(repoRoot, workflow.definition), 'utf8')), workflow.tasks);
  }
  if (!Number.isFinite(shortest))
    throw new Error('no callback task with imageBuilds access has a TimeoutSeconds');
  return shortest;
}

/**
 * The artifacts bucket: private (all public access blocked, bucket-owner objects, no ACLs), encrypted with
 * S3-managed keys, TLS only, unversioned, every object expiring after `expiration` and an incomplete
 * multipart upload aborted after a day. Retained when the stack goes (objects expire by themselves);
 * no `autoDeleteObjects`, whose custom-resource Lambda may delete every object of the bucket.
 */
function artifactsBucket(scope: Stack, expiration: Duration): s3.Bucket {
  const days = expiration.toDays();
  if (!Number.isInteger(days) || days < 1)
    throw new Error('artifactsExpiration must be a whole number of days');
  const bucket = new s3.Bucket(scope, 'ArtifactsBucket', {
    encryption: s3.BucketEncryption.S3_MANAGED,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    versioned: false,
    removalPolicy: RemovalPolicy.RETAIN,
    lifecycleRules: [
      {
        id: 'expire-staged-artifacts',
        enabled: true,
        expiration,
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
  });
  acknowledge(
    bucket,
    'AwsSolutions-S1',
    'Holds only short-lived copies of source archives that GitHub already holds (expiring after ' +
      `${days} days), written and read by two roles (FetchSource, the image build) under sources/. A server ` +
      'access log would need a second bucket of its own; for a per-request audit, enable CloudTrail S3 data ' +
      'events on this bucket.',
  );
  return bucket;
}

/**
 * The service's own event bus, named after the stack (`<stack name>-events`: one per stage, never a fixed
 * name). Its resource policy lets only this account put events on it (no other account, organization or
 * service), which IAM narrows further: only the functions that publish may.
 */
function serviceEventBus(scope: Stack): events.EventBus {
  const name = `${scope.stackName}-events`;
  const bus = new events.EventBus(scope, 'ServiceEventBus', {
    eventBusName: name,
    description: 'Preview control plane: GitHub webhook events and the documented custom events',
  });
  // The bus's own Policy property rather than an AWS::Events::EventBusPolicy (CDK's addToResourcePolicy),
  // whose L1 reads a deprecated property; the ARN is built from the name, as the bus cannot name itself.
  const arn = scope.formatArn({ service: 'events', resource: 'event-bus', resourceName: name });
  const statement = new iam.PolicyStatement({
    sid: 'OwnAccountOnly',
    principals: [new iam.AccountRootPrincipal()],
    actions: ['events:PutEvents'],
    resources: [arn],
  });
  (bus.node.defaultChild as events.CfnEventBus).policy = {
    Version: '2012-10-17',
    Statement: [statement.toStatementJson()],
  };
  return bus;
}

/**
 * The media bucket: test-run screenshots and videos under `runs/`, read through presigned GET URLs.
 * Private (all public access blocked, bucket-owner objects, no ACLs), SSE-S3 (a presigned GET needs no
 * KMS grant), TLS 1.2+ only, unversioned, every object expiring after `expiration`, incomplete uploads
 * aborted after a day. Retained when the stack goes (objects expire by themselves).
 */
function mediaBucket(scope: Stack, expiration: Duration): s3.Bucket {
  const days = expiration.toDays({ integral: false });
  if (!Number.isInteger(days) || days < 1) throw new Error('mediaExpiration must be a whole number of days');
  const bucket = new s3.Bucket(scope, 'MediaBucket', {
    encryption: s3.BucketEncryption.S3_MANAGED,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    versioned: false,
    removalPolicy: RemovalPolicy.RETAIN,
    lifecycleRules: [
      {
        id: 'expire-run-media',
        enabled: true,
        expiration,
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
  });
  acknowledge(
    bucket,
    'AwsSolutions-S1',
    `Holds test-run screenshots and videos that expire after ${days} days, written by one role (the run ` +
      'executor) and read through presigned URLs the run routes mint. A server access log would need a ' +
      'second bucket of its own; for a per-request audit, enable CloudTrail S3 data events on this bucket.',
  );
  return bucket;
}

/**
 * The key run-report links are HMAC-signed with: 64 random alphanumerics generated by Secrets Manager
 * (never in the template). Retained, so links already handed out keep working across deploys.
 */
function runLinkSecret(scope: Stack): secretsmanager.Secret {
  const secret = new secretsmanager.Secret(scope, 'RunLinkSecret', {
    description: 'Preview control plane: the HMAC key run-report links are signed with',
    generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
    removalPolicy: RemovalPolicy.RETAIN,
  });
  acknowledge(
    secret,
    'AwsSolutions-SMG4',
    'The HMAC key of run-report links, which stay valid for 7 days: automatic rotation would invalidate ' +
      'every outstanding link at each rotation. To rotate, put a new random value (aws secretsmanager ' +
      'put-secret-value); the functions read it again on their next cold start.',
  );
  return secret;
}

/**
 * The cluster's Kubernetes API endpoint and CA, resolved at deploy time: an `eks:DescribeCluster` of the
 * cluster (a custom resource), whose answer the functions that call the
 * cluster get as EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA. So no function bundles the EKS client (about
 * 50 KB minified each) or calls DescribeCluster on a cold start; the custom resource's role is the only
 * one granted the action, on that cluster only. A cluster that is not ACTIVE has no endpoint yet: the
 * deploy fails, naming the missing field. The CA (about 1.5 KB) counts against Lambda's 4 KB of
 * environment per function.
 */
function clusterApi(scope: Stack, clusterName: string): { endpoint: string; caData: string } {
  const call: cr.AwsSdkCall = {
    service: 'EKS',
    action: 'DescribeCluster',
    parameters: { name: clusterName },
    // Read when created and when the cluster's name changes. A cluster re-created under the same name has
    // a new CA: deploy with another name, or re-create this resource (docs/deploy-to-aws.md).
    physicalResourceId: cr.PhysicalResourceId.of(`${clusterName}-api`),
    outputPaths: ['cluster.endpoint', 'cluster.certificateAuthority.data'],
  };
  const resource = new cr.AwsCustomResource(scope, 'ClusterApi', {
    onCreate: call,
    onUpdate: call,
    installLatestAwsSdk: false,
    policy: cr.AwsCustomResourcePolicy.fromStatements([
      new iam.PolicyStatement({
        actions: clusterDescribeActions,
        resources: [clusterArn(scope, clusterName)],
      }),
    ]),
  });
  // The provider function CDK adds for every AwsCustomResource of the stack (a singleton, at stack level).
  const provider = scope.node.tryFindChild(
    `AWS${cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '')}`,
  );
  const providerRole = provider?.node.tryFindChild('ServiceRole');
  if (providerRole)
    acknowledge(
      providerRole,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      "CDK's AwsCustomResource provider (ClusterApi: one eks:DescribeCluster at deploy time) writes its own " +
        'log with the basic execution policy; it runs only during deployments and its other grant is that ' +
        'one call on that one cluster.',
    );
  return {
    endpoint: resource.getResponseField('cluster.endpoint'),
    caData: resource.getResponseField('cluster.certificateAuthority.data'),
  };
}

/** What a failure queue holds and what to do about a message in it (its alarm's description). */
interface FailureQueueSpec {
  /** What lands in it, worded as its URL output's description. */
  holds: string;
  /** What each message is. */
  message: string;
  /** What an operator does once the cause is known (replay, or why not). */
  action: string;
}

/** The message of an EventBridge target DLQ. */
const deliveredEvent =
  'Each message is the event, with error attributes (ERROR_CODE, ERROR_MESSAGE, RULE_ARN, TARGET_ARN).';
/** The message of a Lambda on-failure destination. */
const invocationRecord =
  'Each message is an invocation record: the event as requestPayload, the error as responsePayload.';
/** What keeps EventBridge from delivering to a function. */
const fixDelivery = 'Fix the cause (a permission, throttling, a deleted function)';
/** Why a schedule's queues need no replay. */
const supersededRun = 'No replay needed: the next run of the schedule supersedes a missed one.';
/** How to replay a message's event to a function (asynchronously, as EventBridge invokes it). */
const replay = (fn: lambda.IFunction, payload: string): string =>
  `replay it with aws lambda invoke --function-name ${fn.functionName} --invocation-type Event ` +
  `--cli-binary-format raw-in-base64-out --payload '<${payload}>' /dev/null, and delete the message`;

/**
 * The topic operational alarms notify, encrypted with its own key: CloudWatch cannot publish to a topic
 * under the AWS-managed `alias/aws/sns` key (its key policy cannot be changed to let CloudWatch use it),
 * so the key policy here lets it. TLS only; CloudWatch alarms of this account may publish.
 */
function alarmTopic(scope: Stack): sns.Topic {
  const key = new kms.Key(scope, 'AlarmTopicKey', {
    description: `${scope.stackName}: encrypts the operational alarm topic`,
    enableKeyRotation: true,
    removalPolicy: RemovalPolicy.DESTROY,
    pendingWindow: Duration.days(7),
  });
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsPublish',
      principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
      actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
      resources: ['*'],
    }),
  );
  const topic = new sns.Topic(scope, 'AlarmTopic', {
    displayName: `${scope.stackName} alarms`,
    masterKey: key,
    enforceSSL: true,
  });
  topic.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsOfThisAccount',
      principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
      actions: ['sns:Publish'],
      resources: [topic.topicArn],
      conditions: {
        StringEquals: { 'aws:SourceAccount': scope.account },
        ArnLike: {
          'aws:SourceArn': scope.formatArn({
            service: 'cloudwatch',
            resource: 'alarm',
            resourceName: '*',
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        },
      },
    }),
  );
  return topic;
}

/**
 * A queue where failed events wait for an operator: encrypted (SSE-SQS), TLS only, kept 14 days, and
 * alarmed: one message visible notifies `topic`, with what the queue holds, how to read it and what to do.
 */
function failureQueue(scope: Stack, id: string, topic: sns.ITopic, spec: FailureQueueSpec): sqs.Queue {
  const queue = new sqs.Queue(scope, id, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.days(14),
  });
  acknowledge(
    queue,
    'AwsSolutions-SQS3',
    `This queue is itself a dead-letter queue (${spec.holds}); cdk-nag recognises only queues named in ` +
      "another queue's redrive policy or a function's DeadLetterConfig, not an EventBridge target DLQ or a " +
      'Lambda on-failure destination.',
  );
  const alarm = new cloudwatch.Alarm(scope, `${id}Alarm`, {
    metric: queue.metricApproximateNumberOfMessagesVisible({
      period: Duration.minutes(5),
      statistic: cloudwatch.Stats.MAXIMUM,
    }),
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    alarmDescription:
      `${spec.holds}. ${spec.message} Inspect: aws sqs receive-message --queue-url ${queue.queueUrl} ` +
      `--attribute-names All --message-attribute-names All --max-number-of-messages 10. ${spec.action}`,
  });
  alarm.addAlarmAction(new cloudwatchActions.SnsAction(topic));
  return queue;
}

/**
 * The REST API's cdk-nag findings that are design decisions (lib/cdk/README.md, "Decisions").
 */
function acknowledgeApiFindings(api: apigateway.RestApi): void {
  acknowledge(
    api,
    'AwsSolutions-APIG2',
    'Every handler validates its request itself (zod schemas in functions/api, answering 400 with the ' +
      'offending field), locally and in Lambda alike; an API Gateway model would be a second, drifting copy.',
  );
  acknowledge(
    api,
    'AwsSolutions-APIG4',
    'Authentication is in the handlers (functions/api/route.ts): API keys (Authorization: Bearer) and client ' +
      'credentials, checked against the tenancy table, and GitHub webhook signatures (X-Hub-Signature-256 over ' +
      'the raw body), the same code locally and in Lambda. An API Gateway authorizer would duplicate it.',
  );
  acknowledge(
    api,
    'AwsSolutions-COG4',
    'Callers are machines holding API keys or client credentials issued by this service, or GitHub signing ' +
      'its webhook deliveries, not Cognito users; the handlers authenticate them (functions/api/route.ts).',
  );
  acknowledge(
    api,
    'AwsSolutions-APIG3',
    'No WAF web ACL by default: the stage throttles (throttlingRateLimit/throttlingBurstLimit) and every ' +
      'route authenticates. An operator who needs WAF associates a web ACL with the stage.',
  );
  acknowledge(
    api,
    'AwsSolutions-APIG6',
    'Execution logging is off by design (lib/cdk/README.md, "API errors"): execution logs and data traces can ' +
      'carry request bodies (secret values). The stage keeps access logs (request id, route template, status, ' +
      'latency; no headers or bodies) and X-Ray traces instead.',
  );
  acknowledge(
    api,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
    "The account-level role API Gateway needs to write access logs (apiGatewayCloudWatchRole); AWS's " +
      'managed policy for it is the documented one, and API Gateway alone can assume the role.',
  );
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
