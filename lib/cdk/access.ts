import { Stack } from 'aws-cdk-lib';
import type * as codebuild from 'aws-cdk-lib/aws-codebuild';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ecr from 'aws-cdk-lib/aws-ecr';
import type * as events from 'aws-cdk-lib/aws-events';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { SOURCES_PREFIX, type TableName } from '../../functions/manifest/tables.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { browserModules } from './bundling.js';

/*
 * What a manifest entry's `access` grants, kind by kind: the actions (which the infra tests hold the
 * grants to), the prefixes, the environment variables a function learns its resources from, and the
 * shape of the resources each kind refers to (`AccessResources`). ServiceFunction's `bind*` methods grant them.
 */

/** The env var through which a function learns each workflow's state machine ARN (read by config.ts). */
export const stateMachineArnEnv: Record<WorkflowName, string> = {
  deploy: 'STATE_MACHINE_DEPLOY_ARN',
  teardown: 'STATE_MACHINE_TEARDOWN_ARN',
  redeployApp: 'STATE_MACHINE_REDEPLOY_APP_ARN',
  testRun: 'STATE_MACHINE_TEST_RUN_ARN',
};

/**
 * What the function is: an API route handler, a state machine step, an EventBridge rule's target or a
 * worker (functions/manifest/workers.ts: invoked asynchronously by the service itself).
 */
export type FunctionKind = 'api' | 'step' | 'event' | 'worker';

/** Every table of the stateful stack, by manifest name. */
export type Tables = Record<TableName, dynamodb.ITable>;

/**
 * Where staged source archives live in the artifacts bucket (`artifactKeys.source` in
 * functions/manifest/tables.ts builds every key under it; an infra test holds the two equal). Functions
 * and the image build reach only this prefix.
 */
export const sourcesPrefix = SOURCES_PREFIX;

/** The DynamoDB calls of `R` access (item reads, queries, scans, and DescribeTable: metadata only). */
export const tableReadActions = [
  'dynamodb:GetItem',
  'dynamodb:BatchGetItem',
  'dynamodb:Query',
  'dynamodb:Scan',
  'dynamodb:ConditionCheckItem',
  'dynamodb:DescribeTable',
];
/** What `RW` adds (transactions need no action of their own: each item needs its Put/Update/Delete). */
export const tableWriteActions = [
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:BatchWriteItem',
];
/** `R` on the artifacts bucket; ListBucket makes a HeadObject of a missing key a 404 rather than a 403. */
export const artifactReadActions = ['s3:GetObject'];
/** What `RW` adds: single and multipart uploads (lib-storage's `Upload`), and aborting a failed one. */
export const artifactWriteActions = ['s3:PutObject', 's3:AbortMultipartUpload'];
/** `imageBuilds`: start builds and read them, read the pushed images, read the build logs. */
export const imageBuildActions = {
  project: ['codebuild:StartBuild'],
  repository: ['ecr:BatchGetImage'],
  logs: ['logs:GetLogEvents'],
};

/** `logs` access (an app's and its build's output): the image-build log, read only. */
export const logReadActions = ['logs:GetLogEvents'];

/**
 * What resolves the cluster's API endpoint and CA at deploy time (the stack's `ClusterApi` custom
 * resource, `clusterApi` of constructs/cluster-api.ts); the functions themselves get no EKS action (the rest is
 * Kubernetes RBAC).
 */
export const clusterDescribeActions = ['eks:DescribeCluster'];

/** The ARN of an EKS cluster of the stack's account and region, by name. */
export function clusterArn(scope: Construct, name: string): string {
  return Stack.of(scope).formatArn({ service: 'eks', resource: 'cluster', resourceName: name });
}

/** The image build, as the functions with `imageBuilds` access see it. */
export interface ImageBuildResources {
  project: codebuild.IProject;
  repository: ecr.IRepository;
  logGroup: logs.ILogGroup;
}

/** The GitHub App (source host), as the functions with `sourceHost` access see it. */
export interface SourceHostResources {
  /** `{"appId","privateKey","webhookSecret"}`, filled by the operator. */
  secret: secretsmanager.ISecret;
  /** REST API base URL (GITHUB_API_URL). */
  apiUrl: string;
}

/** Test-run media and report links, as the functions with `media` access see them. */
export interface MediaResources {
  /** Screenshots and videos (MEDIA_BUCKET), under `runs/` (`mediaPrefix`). */
  bucket: s3.IBucket;
  /** The key report links are HMAC-signed with (RUN_LINK_SECRET_ARN): a generated random string. */
  linkSecret: secretsmanager.ISecret;
}

/** The headless browser, as the functions with `browser` access see it. */
export interface BrowserResources {
  /** Where ffmpeg is in the function (PREVIEW_FFMPEG_PATH). */
  ffmpegPath: string;
  /** The layer that puts it there, if the deployment has one. */
  ffmpegLayer?: lambda.ILayerVersion;
}

/**
 * Where test-run media live in the media bucket: `mediaKeys` (functions/core/run-store.ts) builds every key
 * under it (an infra test holds the two equal). Functions reach only this prefix.
 */
export const mediaPrefix = 'runs/';
/** `media: 'R'`: presigned GETs are authorized by the signing role's s3:GetObject. */
export const mediaReadActions = ['s3:GetObject'];
/**
 * `media: 'W'` (and what `RW` adds): screenshots and videos through lib-storage's `Upload` (a PutObject, or
 * a multipart upload for a video longer than 5 MiB), and aborting a failed multipart upload.
 */
export const mediaWriteActions = ['s3:PutObject', 's3:AbortMultipartUpload'];
/** `publishes`: put events on the service's own bus (and nothing else: no rule or bus management). */
export const publishActions = ['events:PutEvents'];

/**
 * What a function that drives a headless browser needs (`browser` access): @sparticuz/chromium ships an
 * x86_64 Chromium only, which unpacks into /tmp and wants at least 2 GB of memory.
 */
export const browserRequirements = {
  architecture: lambda.Architecture.X86_64,
  minMemorySize: 2048,
  /** Left out of the bundle and shipped in the function's node_modules (lib/cdk/bundling.ts). */
  modules: browserModules,
} as const;

/**
 * The Kubernetes group every role that calls the cluster's API is mapped to (by its EKS access entry, or
 * the aws-auth ConfigMap), and which deploy/rbac.yaml binds to the `preview-runtime` ClusterRole.
 */
export const clusterGroup = 'preview-runtime';

/**
 * The EKS cluster previews run on, and how their Ingresses look (functions/ports/runtime/eks/cluster.ts reads these
 * as EKS_* variables, validated by shared/config.ts).
 */
/** The cluster's network, for the verifier's internal load balancer (constructs/access-verifier.ts). */
export interface VerifierNetwork {
  vpcId: string;
  subnetIds: string[];
  /** The security group of the nodes or pods that send the auth requests (the EKS cluster security group). */
  clusterSecurityGroupId: string;
}

export interface ClusterSettings {
  /** The cluster's name (EKS_CLUSTER_NAME), in the stack's account and region. */
  name: string;
  /** Create an EKS access entry for each role that calls the cluster (else: the aws-auth ConfigMap). */
  accessEntries: boolean;
  /** EKS_ROUTING */
  routing: 'gateway' | 'ingress';
  /** EKS_GATEWAY_NAME, EKS_GATEWAY_NAMESPACE, EKS_GATEWAY_SECTION */
  gatewayName?: string;
  gatewayNamespace?: string;
  gatewaySection?: string;
  /** EKS_PROTECTION */
  protection: 'envoy-security-policy' | 'gateway-external-auth' | 'none';
  /** PREVIEW_DEFAULT_ACCESS */
  defaultAccess?: 'protected' | 'public';
  /** EKS_INGRESS_CLASS (Ingress routing) */
  ingressClassName?: string;
  /** EKS_INGRESS_DOMAIN: app hosts are `<app>-<namespace>.<domain>`. */
  ingressDomain: string;
  /** EKS_INGRESS_NAMESPACE: the proxies' namespace, admitted by every NetworkPolicy. */
  ingressNamespace?: string;
  /** EKS_INGRESS_ANNOTATIONS (as JSON) */
  ingressAnnotations?: Record<string, string>;
  /** EKS_TLS_SECRET_NAME */
  tlsSecretName?: string;
  /**
   * Where the access verifier's internal load balancer goes (the cluster's VPC, two or more of its subnets,
   * and the security group the Gateway's pods use), or undefined: no load balancer, the function URL only.
   */
  verifierNetwork?: VerifierNetwork;
  /** EKS_ALLOW_FROM_CIDRS (comma-separated) */
  allowFromCidrs?: string[];
  /** EKS_DB_STORAGE_SIZE, EKS_DB_STORAGE_CLASS, EKS_CNPG_NAMESPACE: preview.yaml's postgres services. */
  dbStorageSize?: string;
  dbStorageClass?: string;
  cnpgNamespace?: string;
  /**
   * The cluster's Kubernetes API, resolved at deploy time (eks:DescribeCluster by the stack's custom
   * resource): EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA of the functions that call the cluster, so none
   * of them bundles the EKS client nor calls DescribeCluster on a cold start.
   */
  api?: { endpoint: string; caData: string };
}

/** The runtime, as the functions with `runtime` (the cluster) or `invokesWatcher` access see it. */
export interface RuntimeResources {
  /** Unset: no cluster (images build; deploys fail saying no cluster is configured). */
  cluster?: ClusterSettings;
  /** The rollout watcher (functions/manifest/workers.ts), which the runtime invokes asynchronously. */
  watcher: lambda.IFunction;
}

/** What a manifest entry's `access` may refer to; a kind it declares must be here, or binding throws. */
export interface AccessResources {
  tables: Tables;
  stateMachines?: Partial<Record<WorkflowName, sfn.IStateMachine>>;
  /** The GitHub App: for `sourceHost` and `prStatus` (and the webhook route's signature check). */
  sourceHost?: SourceHostResources;
  /** The service's own event bus, for `publishes`. */
  eventBus?: events.IEventBus;
  media?: MediaResources;
  browser?: BrowserResources;
  artifacts?: s3.IBucket;
  imageBuilds?: ImageBuildResources;
  runtime?: RuntimeResources;
  /** The service's public base URL (the `publicUrl` context key), for `gateLinks`; unset: no links. */
  publicUrl?: string;
}
