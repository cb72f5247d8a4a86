import * as z from 'zod/mini';
import { type TableName, tableNames, tables } from '../manifest/tables.js';
import { ConfigError } from './errors.js';
import { issuePath } from './validation.js';

/**
 * Service configuration, read from the environment and validated once per container (cold start).
 * The same variables drive Lambda (set by CDK) and local mode (set by the local server): local mode
 * differs only in `PREVIEW_MODE=local`, the DynamoDB endpoint and the data directory.
 */
const nonEmpty = z.string().check(z.minLength(1));
const schema = z
  .object({
    PREVIEW_MODE: z._default(z.enum(['aws', 'local']), 'aws'),
    AWS_REGION: z.optional(nonEmpty),
    DYNAMODB_ENDPOINT: z.optional(
      z
        .string()
        .check(
          z.regex(/^(https?:\/\/\S+|unix:\/\S+)$/, 'must be http(s)://host:port or unix:/path/to/socket'),
        ),
    ),
    PREVIEW_DATA_DIR: z.optional(nonEmpty),
    PREVIEW_GIT_ROOT: z.optional(nonEmpty),
    PREVIEW_WORK_DIR: z.optional(nonEmpty),
    SECRET_NAME_PREFIX: z._default(nonEmpty, 'preview'),
    PREVIEW_AUTH_CACHE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0), z.lte(60)), 30),
    PREVIEW_READY_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(3600)), 120),
    STATE_MACHINE_DEPLOY_ARN: z.optional(nonEmpty),
    STATE_MACHINE_TEARDOWN_ARN: z.optional(nonEmpty),
    STATE_MACHINE_REDEPLOY_APP_ARN: z.optional(nonEmpty),
    STATE_MACHINE_TEST_RUN_ARN: z.optional(nonEmpty),
    ARTIFACTS_BUCKET: z.optional(nonEmpty),
    IMAGE_BUILD_PROJECT: z.optional(nonEmpty),
    IMAGE_REPOSITORY_URI: z.optional(nonEmpty),
    IMAGE_BUILD_LOG_GROUP: z.optional(nonEmpty),
    GITHUB_APP_SECRET_ARN: z.optional(nonEmpty),
    EKS_CLUSTER_NAME: z.optional(nonEmpty),
    ROLLOUT_WATCHER_FUNCTION: z.optional(nonEmpty),
    GITHUB_API_URL: z._default(z.string().check(z.url()), 'https://api.github.com'),
    EVENT_BUS_NAME: z.optional(nonEmpty),
    PREVIEW_GITHUB_WEBHOOK_SECRET: z.optional(nonEmpty),
    PREVIEW_EXPIRY_SWEEP_SECONDS: z.optional(z.coerce.number().check(z.int(), z.gte(1), z.lte(86_400))),
    MEDIA_BUCKET: z.optional(nonEmpty),
    RUN_LINK_SECRET_ARN: z.optional(nonEmpty),
    PREVIEW_BROWSER_PATH: z.optional(nonEmpty),
    PREVIEW_FFMPEG_PATH: z.optional(nonEmpty),
    PREVIEW_RUN_STEP_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(600)), 15),
    PREVIEW_RUN_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(5), z.lte(840)), 600),
    ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, nonEmpty])),
  })
  .check(
    z.superRefine((env, ctx) => {
      if (env.PREVIEW_MODE === 'aws' && !env.AWS_REGION) {
        ctx.addIssue({ code: 'custom', path: ['AWS_REGION'], message: 'required in aws mode' });
      }
      if (env.PREVIEW_MODE === 'local' && !env.PREVIEW_DATA_DIR) {
        ctx.addIssue({ code: 'custom', path: ['PREVIEW_DATA_DIR'], message: 'required in local mode' });
      }
    }),
  );

export interface Config {
  mode: 'aws' | 'local';
  region: string;
  dynamodbEndpoint?: string;
  dataDir?: string;
  gitRoot?: string;
  /** Local runtime: where apps' working copies go (default: under the OS temp dir, per data dir). */
  workDir?: string;
  secretNamePrefix: string;
  /** How long a container trusts credentials it found valid (a revoked key stops working within it). */
  authCacheSeconds: number;
  /** Local runtime: how long an app may take to answer its readiness check. */
  readyTimeoutSeconds: number;
  stateMachines: { deploy?: string; teardown?: string; redeployApp?: string; testRun?: string };
  /** AWS mode: where source archives are staged (S3 bucket name). */
  artifactsBucket?: string;
  /** AWS mode: the CodeBuild project that builds app images, its log group and the ECR repository URI. */
  imageBuilds: { project?: string; repositoryUri?: string; logGroup?: string };
  /** AWS mode: the GitHub App (its secret's ARN) and the REST API base URL (GitHub Enterprise, tests). */
  github: { appSecretArn?: string; apiUrl: string };
  /**
   * AWS mode: the EKS cluster previews run on (its name; the ingress and the rest are read by
   * `eksClusterFromEnv`, EKS_*), and the rollout watcher Lambda the deploy step invokes.
   */
  eks: { clusterName?: string; watcherFunction?: string };
  /**
   * Previews that follow the pull request: the service's own event bus (AWS mode: its name, which the
   * stack sets), the webhook secret in local mode (PREVIEW_GITHUB_WEBHOOK_SECRET; when unset the local
   * server generates one into the data dir), and how often the local expiry sweep runs.
   */
  events: { busName?: string; localWebhookSecret?: string; expirySweepSeconds?: number };
  /**
   * Test runs: the media bucket and the secret that signs report links (AWS mode), the browser and
   * ffmpeg binaries (default: Debian's /usr/bin/chromium and ffmpeg on PATH locally; @sparticuz/chromium
   * and /opt/bin/ffmpeg in Lambda), and the default timeouts per step and per run (15 s, 10 min).
   */
  runs: {
    mediaBucket?: string;
    linkSecretArn?: string;
    browserPath?: string;
    ffmpegPath?: string;
    stepTimeoutSeconds: number;
    runTimeoutSeconds: number;
  };
  tableNames: Record<TableName, string>;
}

/** Parse and validate an environment; throws ConfigError naming every bad variable. */
export function parseConfig(env: NodeJS.ProcessEnv): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${issuePath(i.path) || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = parsed.data as Record<string, string | undefined> & z.infer<typeof schema>;
  return {
    mode: e.PREVIEW_MODE,
    region: e.AWS_REGION ?? 'local',
    dynamodbEndpoint: e.DYNAMODB_ENDPOINT,
    dataDir: e.PREVIEW_DATA_DIR,
    gitRoot: e.PREVIEW_GIT_ROOT,
    workDir: e.PREVIEW_WORK_DIR,
    secretNamePrefix: e.SECRET_NAME_PREFIX,
    authCacheSeconds: e.PREVIEW_AUTH_CACHE_SECONDS,
    readyTimeoutSeconds: e.PREVIEW_READY_TIMEOUT_SECONDS,
    stateMachines: {
      deploy: e.STATE_MACHINE_DEPLOY_ARN,
      teardown: e.STATE_MACHINE_TEARDOWN_ARN,
      redeployApp: e.STATE_MACHINE_REDEPLOY_APP_ARN,
      testRun: e.STATE_MACHINE_TEST_RUN_ARN,
    },
    artifactsBucket: e.ARTIFACTS_BUCKET,
    imageBuilds: {
      project: e.IMAGE_BUILD_PROJECT,
      repositoryUri: e.IMAGE_REPOSITORY_URI,
      logGroup: e.IMAGE_BUILD_LOG_GROUP,
    },
    eks: { clusterName: e.EKS_CLUSTER_NAME, watcherFunction: e.ROLLOUT_WATCHER_FUNCTION },
    github: { appSecretArn: e.GITHUB_APP_SECRET_ARN, apiUrl: e.GITHUB_API_URL.replace(/\/+$/, '') },
    events: {
      busName: e.EVENT_BUS_NAME,
      localWebhookSecret: e.PREVIEW_GITHUB_WEBHOOK_SECRET,
      expirySweepSeconds: e.PREVIEW_EXPIRY_SWEEP_SECONDS,
    },
    runs: {
      mediaBucket: e.MEDIA_BUCKET,
      linkSecretArn: e.RUN_LINK_SECRET_ARN,
      browserPath: e.PREVIEW_BROWSER_PATH,
      ffmpegPath: e.PREVIEW_FFMPEG_PATH,
      stepTimeoutSeconds: e.PREVIEW_RUN_STEP_TIMEOUT_SECONDS,
      runTimeoutSeconds: e.PREVIEW_RUN_TIMEOUT_SECONDS,
    },
    tableNames: Object.fromEntries(tableNames.map((t) => [t, e[tables[t].envVar] as string])) as Record<
      TableName,
      string
    >,
  };
}

let cached: Config | undefined;
/** The validated configuration of this container, parsed on first use. */
export function config(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}
