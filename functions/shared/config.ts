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

/** A JSON object whose values are all strings (EKS_INGRESS_ANNOTATIONS). */
function isStringRecord(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return (
      typeof value === 'object' &&
      value !== null &&
      !Array.isArray(value) &&
      Object.values(value).every((v) => typeof v === 'string')
    );
  } catch {
    return false;
  }
}
const CIDR_RE = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)\/\d{1,3}$/;

/**
 * The EKS cluster previews run on (AWS mode; the stack sets them on the functions that call it). Only the
 * cluster's name decides whether there is a cluster; the domain and the way in (the Gateway, or the ingress
 * class) are required when one is used (`eksClusterOptions`), the endpoint and CA come together or not at
 * all, and a default access of `protected` where protection cannot be enforced is refused.
 */
const eksVariables = {
  EKS_CLUSTER_NAME: z.optional(nonEmpty),
  ROLLOUT_WATCHER_FUNCTION: z.optional(nonEmpty),
  EKS_CLUSTER_ENDPOINT: z.optional(
    z.string().check(z.regex(/^https?:\/\/\S+$/, 'must be the URL of the cluster API (https://…)')),
  ),
  EKS_CLUSTER_CA_DATA: z.optional(nonEmpty),
  /** How visitors reach the apps: an HTTPRoute on the operator's Gateway (the default), or an Ingress. */
  EKS_ROUTING: z._default(z.enum(['gateway', 'ingress']), 'gateway'),
  EKS_GATEWAY_NAME: z.optional(nonEmpty),
  EKS_GATEWAY_NAMESPACE: z.optional(nonEmpty),
  EKS_GATEWAY_SECTION: z.optional(nonEmpty),
  /** Who enforces protected previews (docs/deploy-to-aws.md "Protection"). */
  EKS_PROTECTION: z._default(z.enum(['envoy-security-policy', 'gateway-external-auth', 'none']), 'none'),
  /** The access of an application that set none (AWS: `protected` unless the stack chose otherwise). */
  PREVIEW_DEFAULT_ACCESS: z.optional(z.enum(['protected', 'public'])),
  EKS_INGRESS_CLASS: z.optional(nonEmpty),
  EKS_INGRESS_DOMAIN: z.optional(nonEmpty),
  EKS_INGRESS_NAMESPACE: z.optional(nonEmpty),
  EKS_INGRESS_ANNOTATIONS: z.optional(
    z.string().check(z.refine(isStringRecord, 'must be a JSON object of strings')),
  ),
  EKS_TLS_SECRET_NAME: z.optional(nonEmpty),
  EKS_ALLOW_FROM_CIDRS: z.optional(
    z
      .string()
      .check(
        z.refine(
          (v) => v.split(',').every((c) => !c.trim() || CIDR_RE.test(c.trim())),
          'must be comma-separated CIDR blocks (10.0.0.0/8,fd00::/8)',
        ),
      ),
  ),
  EKS_SYSTEM_NAMESPACE: z.optional(nonEmpty),
  EKS_DB_STORAGE_SIZE: z.optional(
    z.string().check(z.regex(/^[1-9][0-9]*(Mi|Gi|Ti)$/, 'must be a size such as 1Gi or 512Mi')),
  ),
  EKS_DB_STORAGE_CLASS: z.optional(nonEmpty),
  EKS_CNPG_NAMESPACE: z.optional(nonEmpty),
  ACCESS_VERIFIER_URL: z.optional(nonEmpty),
};
type EksVariables = { [K in keyof typeof eksVariables]?: string } & {
  EKS_ROUTING?: 'gateway' | 'ingress';
  EKS_PROTECTION?: EksConfig['protection'];
  PREVIEW_DEFAULT_ACCESS?: 'protected' | 'public';
};
type RefineContext = Parameters<Parameters<typeof z.superRefine>[0]>[1];
function checkEks(env: EksVariables, ctx: RefineContext): void {
  if (env.EKS_CLUSTER_NAME && env.PREVIEW_DEFAULT_ACCESS === 'protected' && protectionRefusal(eksOf(env)))
    ctx.addIssue({
      code: 'custom',
      path: ['PREVIEW_DEFAULT_ACCESS'],
      message: `cannot be protected: ${protectionRefusal(eksOf(env))}`,
    });
  if (Boolean(env.EKS_CLUSTER_ENDPOINT) !== Boolean(env.EKS_CLUSTER_CA_DATA)) {
    ctx.addIssue({
      code: 'custom',
      path: ['EKS_CLUSTER_ENDPOINT'],
      message: 'EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA are set together or not at all',
    });
  }
}

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
    PREVIEW_APP_PORTS: z.optional(
      z.string().check(
        z.regex(/^\s*\d{1,5}\s*-\s*\d{1,5}\s*$/, 'must be a range of ports FIRST-LAST, e.g. 40000-40999'),
        z.refine((v) => {
          const [first, last] = v.split('-').map((n) => Number(n.trim()));
          return first! >= 1024 && last! <= 65_535 && first! <= last!;
        }, 'must be FIRST-LAST with 1024 <= FIRST <= LAST <= 65535'),
      ),
    ),
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
    ...eksVariables,
    GITHUB_API_URL: z._default(z.string().check(z.url()), 'https://api.github.com'),
    /** The service's public base URL (the merge gate's links); unset: the check run carries no links. */
    PUBLIC_URL: z.optional(
      z
        .string()
        .check(
          z.regex(
            /^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/,
            'must be the base URL of the API (https://host[/stage]), without a query or fragment',
          ),
        ),
    ),
    EVENT_BUS_NAME: z.optional(nonEmpty),
    PREVIEW_GITHUB_WEBHOOK_SECRET: z.optional(nonEmpty),
    PREVIEW_EXPIRY_SWEEP_SECONDS: z.optional(z.coerce.number().check(z.int(), z.gte(1), z.lte(86_400))),
    MEDIA_BUCKET: z.optional(nonEmpty),
    RUN_LINK_SECRET_ARN: z.optional(nonEmpty),
    PREVIEW_BROWSER_PATH: z.optional(nonEmpty),
    PREVIEW_FFMPEG_PATH: z.optional(nonEmpty),
    PREVIEW_RUN_STEP_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(600)), 15),
    PREVIEW_RUN_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(5), z.lte(840)), 600),
    PREVIEW_WAKE_TIMEOUT_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(600)), 120),
    PREVIEW_RUN_CONCURRENCY: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(16)), 2),
    PREVIEW_ORG_REQUESTS_PER_SECOND: z._default(z.coerce.number().check(z.gte(0), z.lte(10_000)), 20),
    PREVIEW_ORG_CONCURRENT_DEPLOYS: z._default(z.coerce.number().check(z.int(), z.gte(0), z.lte(10_000)), 20),
    PREVIEW_ORG_CONCURRENT_RUNS: z._default(z.coerce.number().check(z.int(), z.gte(0), z.lte(10_000)), 10),
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
      checkEks(env, ctx);
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
  /** Local runtime: the ports apps may listen on (PREVIEW_APP_PORTS `FIRST-LAST`); default any free one. */
  appPorts?: { first: number; last: number };
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
   * The service's public base URL, without a trailing slash (PUBLIC_URL: AWS, the stack's `publicUrl`;
   * locally, the server's own URL unless set): the merge gate's details, report and screenshot links.
   * Unset: the check run carries no links.
   */
  publicUrl?: string;
  /** AWS mode: the EKS cluster previews run on (EKS_*) and the rollout watcher Lambda the deploy step invokes. */
  eks: EksConfig;
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
    /**
     * How long a run waits for its preview to wake and each app to answer before its first step
     * (PREVIEW_WAKE_TIMEOUT_SECONDS, 1–600, default 120; never past the run's own limit).
     */
    wakeTimeoutSeconds: number;
    /** Local runs at once (PREVIEW_RUN_CONCURRENCY, 1–16, default 2); the others wait in order. */
    concurrency: number;
  };
  /**
   * Each organization's fair share (core/fair-share.ts); 0 turns a limit off. Requests: per second,
   * counted in 10-second windows. Deploys: environments pending, building or deploying. Runs: pending or
   * running.
   */
  fairShare: { requestsPerSecond: number; concurrentDeploys: number; concurrentRuns: number };
  tableNames: Record<TableName, string>;
}

/** The EKS cluster's settings (`Config.eks`): what eks/connection.ts `connectionOptions` builds the adapter from. */
export interface EksConfig {
  clusterName?: string;
  watcherFunction?: string;
  /** The cluster API and its CA (base64), resolved by the stack at deploy time; both or neither. */
  api?: { endpoint: string; caData: string };
  /** How visitors reach the apps (EKS_ROUTING). */
  routing: 'gateway' | 'ingress';
  /** The Gateway the apps' HTTPRoutes attach to (EKS_GATEWAY_NAME, _NAMESPACE, _SECTION). */
  gatewayName?: string;
  gatewayNamespace?: string;
  gatewaySection?: string;
  /** Who enforces protected previews (EKS_PROTECTION). */
  protection: 'envoy-security-policy' | 'gateway-external-auth' | 'none';
  /** The access of an application that set none (PREVIEW_DEFAULT_ACCESS). */
  defaultAccess?: 'protected' | 'public';
  ingressClassName?: string;
  /** Apps are served at `<app>-<namespace>.<domain>`. */
  domain?: string;
  ingressNamespace?: string;
  ingressAnnotations?: Record<string, string>;
  tlsSecretName?: string;
  allowFromCidrs?: string[];
  systemNamespace?: string;
  /** preview.yaml services: each Postgres volume's size and class, the CloudNativePG operator's namespace. */
  dbStorageSize?: string;
  dbStorageClass?: string;
  cnpgNamespace?: string;
  /** The access verifier a protected app's way in asks (the front door: eks/door/front-door.ts). */
  verifierUrl?: string;
}

/**
 * Why this stack's previews on EKS cannot be protected, naming the setting; undefined when they can (or
 * when there is no cluster). The API refuses `access: protected` with it, and a deploy of a preview still
 * protected fails with it (eks/door/front-door.ts).
 */
export function protectionRefusal(
  eks: Pick<EksConfig, 'clusterName' | 'routing' | 'protection'>,
): string | undefined {
  if (!eks.clusterName) return undefined;
  if (eks.routing === 'ingress')
    return "protection needs Gateway routing: the stack's routing setting is ingress (context keys routing=gateway and protection)";
  if (eks.protection === 'none')
    return "protection cannot be enforced on this cluster: the stack's protection setting is none (context key protection: envoy-security-policy or gateway-external-auth)";
  return undefined;
}

function eksOf(e: EksVariables): EksConfig {
  return {
    clusterName: e.EKS_CLUSTER_NAME,
    watcherFunction: e.ROLLOUT_WATCHER_FUNCTION,
    api:
      e.EKS_CLUSTER_ENDPOINT && e.EKS_CLUSTER_CA_DATA
        ? { endpoint: e.EKS_CLUSTER_ENDPOINT, caData: e.EKS_CLUSTER_CA_DATA }
        : undefined,
    routing: e.EKS_ROUTING ?? 'gateway',
    gatewayName: e.EKS_GATEWAY_NAME,
    gatewayNamespace: e.EKS_GATEWAY_NAMESPACE,
    gatewaySection: e.EKS_GATEWAY_SECTION,
    protection: e.EKS_PROTECTION ?? 'none',
    defaultAccess: e.PREVIEW_DEFAULT_ACCESS,
    ingressClassName: e.EKS_INGRESS_CLASS,
    domain: e.EKS_INGRESS_DOMAIN,
    ingressNamespace: e.EKS_INGRESS_NAMESPACE,
    ingressAnnotations: e.EKS_INGRESS_ANNOTATIONS
      ? (JSON.parse(e.EKS_INGRESS_ANNOTATIONS) as Record<string, string>)
      : undefined,
    tlsSecretName: e.EKS_TLS_SECRET_NAME,
    allowFromCidrs: e.EKS_ALLOW_FROM_CIDRS?.split(',')
      .map((c) => c.trim())
      .filter(Boolean),
    systemNamespace: e.EKS_SYSTEM_NAMESPACE,
    dbStorageSize: e.EKS_DB_STORAGE_SIZE,
    dbStorageClass: e.EKS_DB_STORAGE_CLASS,
    cnpgNamespace: e.EKS_CNPG_NAMESPACE,
    verifierUrl: e.ACCESS_VERIFIER_URL,
  };
}

function invalid(issues: readonly { path: PropertyKey[]; message: string }[]): ConfigError {
  const problems = issues.map((i) => `${issuePath(i.path) || '(env)'}: ${i.message}`);
  return new ConfigError(`invalid configuration: ${problems.join('; ')}`);
}

const eksSchema = z.object(eksVariables).check(z.superRefine(checkEks));
/** The EKS variables alone, validated as `parseConfig` validates them (for tests and tools). */
export function parseEksConfig(env: NodeJS.ProcessEnv): EksConfig {
  const parsed = eksSchema.safeParse(env);
  if (!parsed.success) throw invalid(parsed.error.issues);
  return eksOf(parsed.data);
}

/** `FIRST-LAST` (already validated) as numbers. */
function portRange(value: string): { first: number; last: number } {
  const [first, last] = value.split('-').map((n) => Number(n.trim()));
  return { first: first!, last: last! };
}

/** Parse and validate an environment; throws ConfigError naming every bad variable. */
export function parseConfig(env: NodeJS.ProcessEnv): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw invalid(parsed.error.issues);
  const e = parsed.data as Record<string, string | undefined> & z.infer<typeof schema>;
  return {
    mode: e.PREVIEW_MODE,
    region: e.AWS_REGION ?? 'local',
    dynamodbEndpoint: e.DYNAMODB_ENDPOINT,
    dataDir: e.PREVIEW_DATA_DIR,
    gitRoot: e.PREVIEW_GIT_ROOT,
    workDir: e.PREVIEW_WORK_DIR,
    ...(e.PREVIEW_APP_PORTS ? { appPorts: portRange(e.PREVIEW_APP_PORTS) } : {}),
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
    eks: eksOf(e),
    github: { appSecretArn: e.GITHUB_APP_SECRET_ARN, apiUrl: e.GITHUB_API_URL.replace(/\/+$/, '') },
    ...(e.PUBLIC_URL ? { publicUrl: e.PUBLIC_URL.replace(/\/+$/, '') } : {}),
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
      wakeTimeoutSeconds: e.PREVIEW_WAKE_TIMEOUT_SECONDS,
      concurrency: e.PREVIEW_RUN_CONCURRENCY,
    },
    fairShare: {
      requestsPerSecond: e.PREVIEW_ORG_REQUESTS_PER_SECOND,
      concurrentDeploys: e.PREVIEW_ORG_CONCURRENT_DEPLOYS,
      concurrentRuns: e.PREVIEW_ORG_CONCURRENT_RUNS,
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

/**
 * The local server's own URL, known once it listens: PUBLIC_URL unless the operator set one (a tunnel,
 * a proxy in front), validated like any other setting.
 */
export function defaultPublicUrl(url: string): void {
  if (!process.env.PUBLIC_URL && url) process.env.PUBLIC_URL = url;
  cached = undefined;
}
