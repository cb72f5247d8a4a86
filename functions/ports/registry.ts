/**
 * The registry: which adapter serves which port, chosen by configuration (`PREVIEW_MODE`) and nothing
 * else, so a handler's code path is the same in both modes.
 *
 * - `aws`: each getter builds its cloud adapter on first use, once per container (SDK clients are created
 *   with it and reused across invocations). The `@__PURE__` marks let esbuild drop the getters, and so the
 *   SDK clients, that a handler does not use.
 * - `local`: the process that hosts the handlers (the local server, the CLI, the test harness) installs the
 *   local adapters with `provideLocalAdapters` before the first request (lib/local/adapters.ts). Lambda
 *   bundles never import local adapter code: this file imports only cloud adapters and contracts.
 *
 * A new port is a folder under `ports/` (contract, adapters, contract test) plus one getter here.
 */
import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { ECRClient } from '@aws-sdk/client-ecr';
import { S3Client } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { config } from '../shared/config.js';
import { ConfigError } from '../shared/errors.js';
import type { Artifacts } from './artifacts/port.js';
import { S3Artifacts } from './artifacts/s3.js';
import { LambdaChromium } from './browser/lambda-chromium.js';
import type { Browser } from './browser/port.js';
import { EventBridgeBus } from './events/eventbridge.js';
import type { EventBus } from './events/port.js';
import type { MediaStore } from './media/port.js';
import { S3MediaStore } from './media/s3.js';
import { GitHubAppPrStatus } from './pr-status/github-app.js';
import type { PrStatus } from './pr-status/port.js';
import { CloudRuntime } from './runtime/cloud.js';
import { CodeBuildImages } from './runtime/codebuild-images.js';
import { type EksCluster, eksClusterFromEnv } from './runtime/eks.js';
import type { Runtime } from './runtime/port.js';
import type { SecretStore } from './secret-store/port.js';
import { SecretsManagerStore } from './secret-store/secrets-manager.js';
import { GitHubAppCredentials, GitHubAppSourceHost } from './source-host/github-app.js';
import type { SourceHost } from './source-host/port.js';
import { GitHubAppWebhookSecret } from './webhook-secret/github-app.js';
import type { WebhookSecret } from './webhook-secret/port.js';
import type { Workflows } from './workflows/port.js';
import { StepFunctionsWorkflows } from './workflows/step-functions.js';

/** Every port, by name. */
export interface Adapters {
  secrets: SecretStore;
  workflows: Workflows;
  sourceHost: SourceHost;
  runtime: Runtime;
  artifacts: Artifacts;
  eventBus: EventBus;
  prStatus: PrStatus;
  webhookSecret: WebhookSecret;
  browser: Browser;
  media: MediaStore;
}
export type PortName = keyof Adapters;
type Factories = { [K in PortName]?: () => Adapters[K] };

const localFactories: Factories = {};

/** Install local adapters (local mode only; see the file comment). */
export function provideLocalAdapters(factories: Factories): void {
  Object.assign(localFactories, factories);
}

/** A memoized getter for a port: the cloud factory in `aws` mode, the installed local one in `local` mode. */
function adapter<K extends PortName>(port: K, cloud: () => Adapters[K]): () => Adapters[K] {
  let instance: Adapters[K] | undefined;
  return () => {
    if (instance) return instance;
    if (config().mode === 'local') {
      const factory = localFactories[port] as (() => Adapters[K]) | undefined;
      if (!factory) throw new ConfigError(`no local adapter installed for port "${port}"`);
      instance = factory();
    } else {
      instance = cloud();
    }
    return instance;
  };
}

export const secretStore = /* @__PURE__ */ adapter(
  'secrets',
  () =>
    new SecretsManagerStore(new SecretsManagerClient({ region: config().region }), config().secretNamePrefix),
);

export const workflows = /* @__PURE__ */ adapter(
  'workflows',
  () => new StepFunctionsWorkflows(new SFNClient({ region: config().region }), config().stateMachines),
);

export const sourceHost = /* @__PURE__ */ adapter(
  'sourceHost',
  () =>
    new GitHubAppSourceHost({
      credentials: new GitHubAppCredentials(
        new SecretsManagerClient({ region: config().region }),
        config().github.appSecretArn,
      ),
      apiUrl: config().github.apiUrl,
    }),
);

/** A setting the cloud adapters cannot do without (CDK sets them all): missing is a configuration error. */
function required<T>(value: T | undefined, name: string): T {
  if (value === undefined)
    throw new ConfigError(`${name} is not set: the stack sets it on every function that needs it`);
  return value;
}

export const artifacts = /* @__PURE__ */ adapter(
  'artifacts',
  () =>
    new S3Artifacts(
      new S3Client({ region: config().region }),
      required(config().artifactsBucket, 'ARTIFACTS_BUCKET'),
    ),
);

export const runtime = /* @__PURE__ */ adapter('runtime', () => {
  const c = config();
  const region = { region: c.region };
  const images = new CodeBuildImages({
    codebuild: new CodeBuildClient(region),
    ecr: new ECRClient(region),
    logs: new CloudWatchLogsClient(region),
    project: required(c.imageBuilds.project, 'IMAGE_BUILD_PROJECT'),
    repositoryUri: required(c.imageBuilds.repositoryUri, 'IMAGE_REPOSITORY_URI'),
    artifactsBucket: required(c.artifactsBucket, 'ARTIFACTS_BUCKET'),
    complete: (token, outcome) => workflows().completeTask(token, outcome),
  });
  return new CloudRuntime(images, c.eks.clusterName ? rolloutWatcher() : undefined);
});

/**
 * The EKS cluster previews run on (AWS mode), also what the rollout watcher Lambda drives. Its settings
 * (EKS_CLUSTER_NAME, EKS_INGRESS_*, …) are set by the stack; the watcher invokes itself by its own name.
 */
export const rolloutWatcher = /* @__PURE__ */ (() => {
  let cluster: EksCluster | undefined;
  return (): EksCluster => {
    cluster ??= eksClusterFromEnv({
      watcherFunction: config().eks.watcherFunction ?? process.env.AWS_LAMBDA_FUNCTION_NAME,
      complete: (token, outcome) => workflows().completeTask(token, outcome),
      // A task nobody waits on any more (it timed out, its execution ended): the watcher stops.
      heartbeat: async (token) => ((await workflows().heartbeat(token)) ? undefined : 'gone'),
    });
    return cluster;
  };
})();

/** The image builds of the cloud runtime, for the handler of their completion events (AWS mode only). */
export function imageBuilds(): CodeBuildImages {
  const rt = runtime();
  if (!(rt instanceof CloudRuntime))
    throw new ConfigError('image-build events come from CodeBuild: AWS mode only');
  return rt.images;
}

/** The GitHub App's credentials (its secret), once per container, for the ports below that act as the App. */
const githubAppCredentials = /* @__PURE__ */ (() => {
  let credentials: GitHubAppCredentials | undefined;
  return () =>
    (credentials ??= new GitHubAppCredentials(
      new SecretsManagerClient({ region: config().region }),
      config().github.appSecretArn,
    ));
})();

/**
 * The service's own event bus (EventBridge, EVENT_BUS_NAME). Requests are signed with the credentials of
 * the SDK's default chain (as resolved by an SDK client) and go to `AWS_ENDPOINT_URL_EVENTBRIDGE` when set,
 * as the SDK's clients would.
 */
export const eventBus = /* @__PURE__ */ adapter('eventBus', () => {
  const c = config();
  const chain = new SFNClient({ region: c.region });
  return new EventBridgeBus({
    busName: required(c.events.busName, 'EVENT_BUS_NAME'),
    region: c.region,
    credentials: () => chain.config.credentials(),
    endpoint: process.env.AWS_ENDPOINT_URL_EVENTBRIDGE ?? process.env.AWS_ENDPOINT_URL,
  });
});

/** Status on the pull request: GitHub Deployments and the PR comment, as the GitHub App. */
export const prStatus = /* @__PURE__ */ adapter(
  'prStatus',
  () => new GitHubAppPrStatus({ credentials: githubAppCredentials(), apiUrl: config().github.apiUrl }),
);

/** The secret GitHub signs webhook deliveries with: the App secret's `webhookSecret`. */
export const webhookSecret = /* @__PURE__ */ adapter(
  'webhookSecret',
  () => new GitHubAppWebhookSecret(githubAppCredentials()),
);

/** The browser test runs drive (AWS: @sparticuz/chromium in the run executor Lambda, ffmpeg from a layer). */
export const browser = /* @__PURE__ */ adapter('browser', () => new LambdaChromium(config().runs.ffmpegPath));

/** Test-run media and report links (AWS: the media bucket; link key in Secrets Manager). */
export const mediaStore = /* @__PURE__ */ adapter('media', () => {
  const c = config();
  const secretArn = required(c.runs.linkSecretArn, 'RUN_LINK_SECRET_ARN');
  const secrets = new SecretsManagerClient({ region: c.region });
  return new S3MediaStore(
    new S3Client({ region: c.region }),
    required(c.runs.mediaBucket, 'MEDIA_BUCKET'),
    async () => {
      const out = await secrets.send(new GetSecretValueCommand({ SecretId: secretArn }));
      if (!out.SecretString) throw new ConfigError('the run-link signing secret is empty');
      return Buffer.from(out.SecretString, 'utf8');
    },
  );
});
