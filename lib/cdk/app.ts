import { type App, Tags } from 'aws-cdk-lib';
import type { ClusterOptions } from './cluster.js';
import { type ImageBuildArchitecture, imageBuildArchitectures } from './constructs/image-build-project.js';
import { StatefulStack } from './stateful-stack.js';
import { StatelessStack } from './stateless-stack.js';

export interface PreviewStacks {
  stage: string;
  stateful: StatefulStack;
  stateless: StatelessStack;
}

const stagePattern = /^[a-z][a-z0-9-]{0,19}$/;

/**
 * Add the control plane's two stacks to an app. Context (`cdk synth -c stage=prod`):
 * - `stage` (default `dev`): prefixes the stack names, so several stages coexist in one account;
 * - `secretNamePrefix` (default `preview/<stage>`): where this stage's secret bundles live;
 * - `apiGatewayCloudWatchRole` (default true): set to false when the account already has the
 *   API Gateway logging role;
 * - `githubAppSecretArn` (default: the stateful stack creates an empty secret to fill): the complete ARN of
 *   an existing secret holding the GitHub App's `{"appId","privateKey","webhookSecret"}`;
 * - `githubApiUrl` (default `https://api.github.com`): GitHub's REST API (GitHub Enterprise Server:
 *   `https://<host>/api/v3`);
 * - `publicUrl` (default: none, no links): the service's public base URL (`https://host[/stage]`), the
 *   merge gate's report and screenshot links (PUBLIC_URL of the functions with `gateLinks` access);
 * - `imageBuildArchitecture` (default `x86_64`, or `arm64`): what image builds run on and produce;
 * - `eksClusterName` (default: none, the stack deploys without a cluster: images build, deploys fail
 *   saying no cluster is configured): the EKS cluster previews run on, in the stack's account and region;
 * - `eksAccessEntries` (default true): false when the cluster maps IAM roles in aws-auth instead;
 * - `ingressDomain` (required with a cluster): the wildcard domain apps answer under, without `*.`;
 * - `routing` (default `gateway`, or `ingress`); `gatewayName`, `gatewayNamespace` (required with
 *   `gateway`), `gatewaySection` (default: every listener); `protection` (default
 *   `envoy-security-policy`, or `gateway-external-auth`, or `none`); `defaultAccess` (required, and only
 *   `public`, with `protection=none`: never silently public);
 * - `ingressClassName` (required with `routing=ingress`), `ingressNamespace` (default: the Gateway's);
 * - `ingressAnnotations` (default none): a JSON object of strings, put on every Ingress;
 * - `tlsSecretName` (default none: the controller's default certificate);
 * - `allowFromCidrs` (default none): comma-separated CIDRs the preview NetworkPolicies also admit;
 * - `dbStorageSize` (default `1Gi`), `dbStorageClass` (default: the cluster's default class),
 *   `cnpgNamespace` (default `cnpg-system`): preview.yaml's postgres services on CloudNativePG;
 * - `verifierVpcId`, `verifierSubnetIds` (comma-separated, two or more), `clusterSecurityGroupId` (default
 *   none: the verifier's function URL only): the access verifier's internal load balancer in the
 *   cluster's VPC, open to that security group, which a Gateway's external auth reaches;
 * - `ffmpegLayerArn` (default: the packaged ffmpeg, lib/cdk/constructs/ffmpeg-layer.ts): an existing x86_64 layer with
 *   ffmpeg at bin/ffmpeg, for test-run videos;
 * - `ffmpegLayerPath` (default: the packaged ffmpeg): or a local directory (or .zip) with bin/ffmpeg;
 * - `orgRequestsPerSecond`, `orgConcurrentDeploys`, `orgConcurrentRuns` (defaults 20, 20, 10): each
 *   organization's fair share (functions/core/fair-share.ts, docs/scale.md).
 * Env-agnostic (no account or region, no lookups): synthesis never calls AWS. The other settings are
 * stack props (StatefulStackProps, StatelessStackProps), with their defaults documented there.
 */
export function addPreviewStacks(app: App): PreviewStacks {
  const stage = String(app.node.tryGetContext('stage') ?? 'dev');
  if (!stagePattern.test(stage)) {
    throw new Error(`context "stage" must match ${stagePattern} (got "${stage}")`);
  }
  const secretNamePrefix = String(app.node.tryGetContext('secretNamePrefix') ?? `preview/${stage}`);
  const cloudWatchRole = app.node.tryGetContext('apiGatewayCloudWatchRole');
  const optional = (key: string): string | undefined => {
    const value = app.node.tryGetContext(key);
    return value === undefined || value === '' ? undefined : String(value);
  };
  const numberContext = (key: string): number | undefined => {
    const value = optional(key);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0)
      throw new Error(`context "${key}" must be a number >= 0 (got "${value}")`);
    return n;
  };
  const architecture = optional('imageBuildArchitecture');
  if (
    architecture !== undefined &&
    !imageBuildArchitectures.includes(architecture as ImageBuildArchitecture)
  ) {
    throw new Error(
      `context "imageBuildArchitecture" must be one of ${imageBuildArchitectures.join(', ')} (got "${architecture}")`,
    );
  }

  const accessEntries = optional('eksAccessEntries');
  if (accessEntries !== undefined && !['true', 'false'].includes(accessEntries)) {
    throw new Error(`context "eksAccessEntries" must be true or false (got "${accessEntries}")`);
  }

  const stateful = new StatefulStack(app, `preview-${stage}-stateful`, {
    description: `Preview control plane (${stage}): tables, GitHub App secret, image repository; retained`,
    githubAppSecretArn: optional('githubAppSecretArn'),
  });
  const stateless = new StatelessStack(app, `preview-${stage}-stateless`, {
    description: `Preview control plane (${stage}): functions, state machines, API, image builds, event bus, test runs`,
    tables: stateful.tables,
    secretNamePrefix,
    apiGatewayCloudWatchRole: cloudWatchRole === undefined ? true : String(cloudWatchRole) !== 'false',
    githubAppSecret: stateful.githubAppSecret,
    githubApiUrl: optional('githubApiUrl'),
    publicUrl: optional('publicUrl'),
    imageRepository: stateful.imageRepository,
    imageBuildArchitecture: architecture as ImageBuildArchitecture | undefined,
    eksClusterName: optional('eksClusterName'),
    eksAccessEntries: accessEntries === undefined ? undefined : accessEntries === 'true',
    routing: optional('routing') as ClusterOptions['routing'],
    gatewayName: optional('gatewayName'),
    gatewayNamespace: optional('gatewayNamespace'),
    gatewaySection: optional('gatewaySection'),
    protection: optional('protection') as ClusterOptions['protection'],
    defaultAccess: optional('defaultAccess') as ClusterOptions['defaultAccess'],
    ingressClassName: optional('ingressClassName'),
    ingressDomain: optional('ingressDomain'),
    ingressNamespace: optional('ingressNamespace'),
    ingressAnnotations: annotationsContext(app.node.tryGetContext('ingressAnnotations')),
    tlsSecretName: optional('tlsSecretName'),
    allowFromCidrs: listContext(app.node.tryGetContext('allowFromCidrs')),
    dbStorageSize: optional('dbStorageSize'),
    dbStorageClass: optional('dbStorageClass'),
    cnpgNamespace: optional('cnpgNamespace'),
    verifierVpcId: optional('verifierVpcId'),
    verifierSubnetIds: listContext(app.node.tryGetContext('verifierSubnetIds')),
    clusterSecurityGroupId: optional('clusterSecurityGroupId'),
    ffmpegLayerArn: optional('ffmpegLayerArn'),
    ffmpegLayerPath: optional('ffmpegLayerPath'),
    fairShare: {
      requestsPerSecond: numberContext('orgRequestsPerSecond'),
      concurrentDeploys: numberContext('orgConcurrentDeploys'),
      concurrentRuns: numberContext('orgConcurrentRuns'),
    },
  });
  for (const stack of [stateful, stateless]) {
    Tags.of(stack).add('project', 'preview-control-plane');
    Tags.of(stack).add('stage', stage);
  }
  return { stage, stateful, stateless };
}

/**
 * `ingressAnnotations` as given: a JSON object of strings on the command line (`-c 'ingressAnnotations={…}'`)
 * or an object in cdk.json.
 */
function annotationsContext(value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === '') return undefined;
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      throw new Error(`context "ingressAnnotations" must be a JSON object of strings (got ${value})`);
    }
  }
  if (
    !parsed ||
    typeof parsed !== 'object' ||
    Array.isArray(parsed) ||
    Object.values(parsed).some((v) => typeof v !== 'string')
  ) {
    throw new Error(
      `context "ingressAnnotations" must be a JSON object of strings (got ${JSON.stringify(value)})`,
    );
  }
  return parsed as Record<string, string>;
}

/** A list context value: comma-separated on the command line, or an array in cdk.json. */
function listContext(value: unknown): string[] | undefined {
  if (value === undefined || value === '') return undefined;
  const items = (Array.isArray(value) ? value.map(String) : String(value).split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length > 0 ? items : undefined;
}
