import { CfnOutput, Stack, type StackProps, Token } from 'aws-cdk-lib';
import type * as apigateway from 'aws-cdk-lib/aws-apigateway';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import type * as events from 'aws-cdk-lib/aws-events';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { type EventRuleId, type ScheduleId, schedules } from '../../functions/manifest/events.js';
import type { RouteAccess, RouteId } from '../../functions/manifest/routes.js';
import { tableNames } from '../../functions/manifest/tables.js';
import type { WorkerId } from '../../functions/manifest/workers.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import type { ClusterSettings, Tables } from './access.js';
import { type ClusterOptions, clusterRouteIds, clusterSettings, clusterStepEntries } from './cluster.js';
import { AccessVerifier } from './constructs/access-verifier.js';
import { Api, type ApiOptions } from './constructs/api.js';
import { clusterApi } from './constructs/cluster-api.js';
import { type EventRuleResources, EventRules, ServiceBus } from './constructs/events.js';
import type { ImageBuildProject } from './constructs/image-build-project.js';
import { ImageBuilds, type ImageBuildsOptions } from './constructs/image-builds.js';
import { Operations } from './constructs/operations.js';
import type { ServiceFunction } from './constructs/service-function.js';
import { TestRuns, type TestRunsOptions } from './constructs/test-runs.js';
import { stepName, type WorkerResources, Workflows } from './constructs/workflows.js';
import { pascal } from './stateful-stack.js';
import { workflowNames } from './workflow-definitions.js';

export interface StatelessStackProps
  extends StackProps,
    ApiOptions,
    ImageBuildsOptions,
    TestRunsOptions,
    ClusterOptions {
  /** The tables of the stateful stack. */
  tables: Tables;
  /** Secret bundles are named `<secretNamePrefix>/<applicationId>/<app>`; functions may touch only those. */
  secretNamePrefix: string;
  /** Retention of every log group of the stack. @default logs.RetentionDays.ONE_MONTH */
  logRetention?: logs.RetentionDays;
  /** The GitHub App's secret (`{"appId","privateKey","webhookSecret"}`), from the stateful stack. */
  githubAppSecret: secretsmanager.ISecret;
  /**
   * GitHub's REST API base URL, passed as GITHUB_API_URL to the functions that talk to the source host
   * (GitHub Enterprise Server: `https://<host>/api/v3`).
   * @default 'https://api.github.com'
   */
  githubApiUrl?: string;
  /**
   * The service's public base URL (the API's custom domain or its stage URL, `https://host[/stage]`),
   * given by the operator: PUBLIC_URL of the functions that bring the merge gate, whose check run then
   * links the dashboard's view of its commit, each run's report and a failed step's screenshot. It is
   * not derived from the API (the gate's steps would depend on the API that starts their state machines).
   * @default none: the check run carries no links
   */
  publicUrl?: string;
  /** The app-image repository, from the stateful stack. */
  imageRepository: ecr.IRepository;
}

/**
 * The stateless stack: everything that can be destroyed and recreated without losing data (its buckets,
 * the run-link secret and every log group are retained or keep their logical ids across upgrades:
 * lib/cdk/logical-ids.ts). It composes one construct per concern (lib/cdk/constructs/), in the order
 * their dependencies go: operations (the alarm topic every failure queue notifies), image builds (the
 * artifacts bucket, the CodeBuild project), test runs (media, the report-link key, ffmpeg, the browser's
 * function shape), the service bus, the workflows (state machines, their steps, the workers), the API
 * (routes, pages, the REST API), the event rules and schedules; then the outputs. Routes, workflows,
 * event rules, schedules and workers come from the manifests (functions/manifest/) the local server also
 * runs, so the cloud and local APIs cannot drift. With `eksClusterName`, the runtime functions get the
 * cluster's settings, and the roles that call it an EKS access entry (Kubernetes group `preview-runtime`,
 * whose rights are deploy/rbac.yaml).
 */
export class StatelessStack extends Stack {
  // The concerns (lib/cdk/constructs/).
  readonly operations: Operations;
  readonly imageBuilds: ImageBuilds;
  readonly testRuns: TestRuns;
  readonly serviceBus: ServiceBus;
  readonly workflows: Workflows;
  readonly api: Api;
  readonly events: EventRules;
  /** The access verifier of protected previews (with a cluster only). */
  readonly accessVerifier?: AccessVerifier;
  /** The EKS cluster and ingress settings, or undefined when the stack has no cluster. */
  readonly cluster?: ClusterSettings;
  // The resources of the constructs most read (by the outputs, the tests, the operators' docs).
  readonly alarmTopic: sns.Topic;
  readonly artifacts: s3.Bucket;
  readonly imageBuild: ImageBuildProject;
  readonly media: s3.Bucket;
  readonly runLinkSecret: secretsmanager.Secret;
  readonly ffmpegLayer: lambda.ILayerVersion;
  readonly eventBus: events.EventBus;
  readonly stepFunctions: Map<string, ServiceFunction>;
  readonly stateMachines: Record<WorkflowName, sfn.StateMachine>;
  readonly workers: Record<WorkerId, WorkerResources>;
  readonly routeFunctions: Record<RouteId, ServiceFunction>;
  readonly restApi: apigateway.RestApi;
  readonly eventRules: Record<EventRuleId, EventRuleResources>;
  readonly schedules: Record<ScheduleId, EventRuleResources>;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const logRetention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const githubApiUrl = props.githubApiUrl ?? 'https://api.github.com';
    if (!Token.isUnresolved(githubApiUrl) && !/^https:\/\/[^\s/]+/.test(githubApiUrl)) {
      throw new Error(`githubApiUrl must be an https URL (got "${githubApiUrl}")`);
    }
    const publicUrl = props.publicUrl?.replace(/\/+$/, '');
    if (
      publicUrl !== undefined &&
      !Token.isUnresolved(publicUrl) &&
      !/^https:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(publicUrl)
    ) {
      throw new Error(`publicUrl must be an https URL without a query (got "${publicUrl}")`);
    }
    const cluster = clusterSettings(props);
    this.cluster = cluster && { ...cluster, api: clusterApi(this, cluster.name) };
    const sourceHost = { secret: props.githubAppSecret, apiUrl: githubApiUrl };

    this.operations = new Operations(this, 'Operations');
    this.imageBuilds = new ImageBuilds(this, 'ImageBuilds', { ...props, logRetention });
    this.testRuns = new TestRuns(this, 'TestRuns', props);
    this.serviceBus = new ServiceBus(this, 'ServiceBus');
    const functions = {
      tables: props.tables,
      secretNamePrefix: props.secretNamePrefix,
      logRetention,
      shape: this.testRuns.functionShape.bind(this.testRuns),
    };
    this.workflows = new Workflows(this, 'Workflows', {
      functions,
      operations: this.operations,
      cluster: this.cluster,
      access: {
        tables: props.tables,
        sourceHost,
        eventBus: this.serviceBus.eventBus,
        media: this.testRuns.media,
        browser: this.testRuns.browser,
        artifacts: this.imageBuilds.artifacts,
        imageBuilds: this.imageBuilds.imageBuild,
        ...(publicUrl ? { publicUrl } : {}),
      },
    });
    const { resources } = this.workflows;
    this.api = new Api(this, 'Api', {
      ...props,
      functions,
      resources,
      sourceHost,
      cluster: this.cluster,
    });
    this.testRuns.allowViewerOrigin(this.api.restApi);
    this.events = new EventRules(this, 'Events', {
      functions,
      resources,
      eventBus: this.serviceBus.eventBus,
      imageBuild: this.imageBuilds.imageBuild,
      operations: this.operations,
    });

    this.alarmTopic = this.operations.alarmTopic;
    this.artifacts = this.imageBuilds.artifacts;
    this.imageBuild = this.imageBuilds.imageBuild;
    this.media = this.testRuns.mediaBucket;
    this.runLinkSecret = this.testRuns.runLinkSecret;
    this.ffmpegLayer = this.testRuns.ffmpegLayer;
    this.eventBus = this.serviceBus.eventBus;
    this.stepFunctions = this.workflows.stepFunctions;
    this.stateMachines = this.workflows.stateMachines;
    this.workers = this.workflows.workers;
    this.routeFunctions = this.api.routeFunctions;
    this.restApi = this.api.restApi;
    this.eventRules = this.events.rules;
    this.schedules = this.events.schedules;
    // A schedule that calls the cluster (the expiry sweep: stale teardown fences) may reach it too.
    if (this.cluster) for (const [, fn] of this.clusterSchedules()) fn.bindClusterAccess(this.cluster);
    // The verifier protected previews' Ingresses ask (the front door): with a cluster only.
    if (this.cluster) {
      this.accessVerifier = new AccessVerifier(this, 'AccessVerifier', {
        ...functions,
        ...(this.cluster.verifierNetwork ? { network: this.cluster.verifierNetwork } : {}),
      });
      for (const [, fn] of this.clusterCallers())
        fn.addEnvironment('ACCESS_VERIFIER_URL', this.accessVerifier.url);
    }
    addOutputs(this, props.tables);
  }

  /**
   * The functions that call the cluster's API (`clusterStepEntries`, `clusterRouteIds`, the workers and the
   * schedules with `runtime` access), by output id. They exist, and are listed, with or without a cluster.
   */
  clusterCallers(): [string, ServiceFunction][] {
    return [
      ...clusterStepEntries.map((entry): [string, ServiceFunction] => [
        `${stepName(entry)}Step`,
        this.workflows.step(entry),
      ]),
      ...clusterRouteIds.map((id): [string, ServiceFunction] => [
        `${pascal(id)}Route`,
        this.routeFunctions[id],
      ]),
      ...(Object.keys(this.workers) as WorkerId[]).map((id): [string, ServiceFunction] => [
        pascal(id),
        this.workers[id].function,
      ]),
      ...this.clusterSchedules(),
    ];
  }

  /** The schedules' functions with `runtime` access (they call the cluster), by output id. */
  private clusterSchedules(): [string, ServiceFunction][] {
    return (Object.keys(schedules) as ScheduleId[])
      .filter((id) => (schedules[id].target.access as RouteAccess).runtime)
      .map((id): [string, ServiceFunction] => [`${pascal(id)}Schedule`, this.schedules[id].function]);
  }
}

/**
 * The stack's outputs, at the stack level under the names operators and scripts read (an infra test holds
 * them): the API's URL, the tables, state machines, buckets, the alarm topic, the bus, the run-link key,
 * the browser function, the image build, every failure queue, the workers and the roles that call the
 * cluster.
 */
function addOutputs(stack: StatelessStack, tables: Tables): void {
  const output = (id: string, value: string, description?: string) =>
    new CfnOutput(stack, id, { value, ...(description ? { description } : {}) });
  output('ApiUrl', stack.restApi.url, 'Base URL of the API');
  for (const name of tableNames) output(`${pascal(name)}TableName`, tables[name].tableName);
  for (const name of workflowNames) {
    output(`${pascal(name)}StateMachineArn`, stack.stateMachines[name].stateMachineArn);
  }
  output('ArtifactsBucketName', stack.artifacts.bucketName);
  output(
    'AlarmTopicArn',
    stack.alarmTopic.topicArn,
    'Operational alarms (a message in any failure queue): subscribe to be notified',
  );
  output(
    'EventBusName',
    stack.eventBus.eventBusName,
    'The service bus: put Preview Redeploy Requested events here (source preview.redeploy)',
  );
  output('EventBusArn', stack.eventBus.eventBusArn);
  output(
    'MediaBucketName',
    stack.media.bucketName,
    'Test-run screenshots and videos (runs/<orgId>/<runId>/...)',
  );
  output(
    'RunLinkSecretArn',
    stack.runLinkSecret.secretArn,
    'The key run-report links are signed with (a new random value invalidates every link)',
  );
  for (const [entry, fn] of stack.stepFunctions) {
    if (!stack.workflows.stepAccess.get(entry)?.browser) continue;
    output(
      `${stepName(entry)}FunctionName`,
      fn.functionName,
      'The function that drives the headless browser (test runs)',
    );
  }
  output('ImageBuildProjectName', stack.imageBuild.project.projectName);
  output('ImageBuildLogGroupName', stack.imageBuild.logGroup.logGroupName);
  const queueOutputs = (id: string, { deliveryDlq, failureDlq }: EventRuleResources, what: string[]) => {
    output(`${id}DeliveryDlqUrl`, deliveryDlq.queueUrl, what[0]);
    output(`${id}FailureDlqUrl`, failureDlq.queueUrl, what[1]);
  };
  for (const ruleId of Object.keys(stack.eventRules) as EventRuleId[]) {
    queueOutputs(pascal(ruleId), stack.eventRules[ruleId], [
      `Events the ${ruleId} rule could not deliver to its function`,
      `Events the ${ruleId} function failed on, after Lambda's retries`,
    ]);
  }
  for (const scheduleId of Object.keys(stack.schedules) as ScheduleId[]) {
    output(`${pascal(scheduleId)}RuleName`, stack.schedules[scheduleId].rule.ruleName);
    queueOutputs(pascal(scheduleId), stack.schedules[scheduleId], [
      `Runs of the ${scheduleId} schedule that could not be delivered to its function`,
      `Runs of the ${scheduleId} schedule its function failed on, after Lambda's retries`,
    ]);
  }
  for (const workerId of Object.keys(stack.workers) as WorkerId[]) {
    const { function: fn, failureDlq } = stack.workers[workerId];
    output(`${pascal(workerId)}FunctionName`, fn.functionName);
    output(
      `${pascal(workerId)}FailureDlqUrl`,
      failureDlq.queueUrl,
      `Invocations of the ${workerId} worker that failed, after Lambda's retries`,
    );
  }
  // The roles that call the cluster: what its access entries name, or what aws-auth must map.
  for (const [id, fn] of stack.clusterCallers()) {
    output(
      `${id}RoleArn`,
      fn.role!.roleArn,
      'A role that calls the EKS cluster (Kubernetes group preview-runtime)',
    );
  }
}
