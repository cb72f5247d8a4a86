/**
 * The cloud simulation tier: the real handlers and step functions in `PREVIEW_MODE=aws`, their AWS SDK
 * clients pointed at loopback fakes through the standard `AWS_ENDPOINT_URL_<SERVICE>` variables (DynamoDB
 * at dynalite), GitHub at a fake REST API through `GITHUB_API_URL`, and the state machines run in-process
 * by the fake Step Functions. The API is served over real HTTP by the same route manifest and proxy-event
 * bridge the local server uses, but nothing local is installed: every adapter is the cloud one.
 *
 * One cloud per test file (configuration is read once per module registry, as once per Lambda container).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { RouteId } from '../../functions/manifest/routes.js';
import { imageBuildSpec } from '../../lib/cdk/constructs/image-build-project.js';
import { stepTimeouts } from '../../lib/cdk/workflow-definitions.js';
import { ensureTables, startDynalite } from '../../lib/local/dynalite.js';
import { compileRoutes, matchRoute, toProxyEvent } from '../../lib/local/http-bridge.js';
import { FakeAws, machineArn, REGION } from './fakes/aws.js';
import { FakeKubernetes } from './fakes/kubernetes/index.js';

export const REPO_ROOT = new URL('../..', import.meta.url).pathname;
export const IMAGE_REPOSITORY = `000000000000.dkr.ecr.${REGION}.amazonaws.com/preview-apps`;
export const GITHUB_APP_SECRET_ARN = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview-github-app`;

type LambdaHandler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

export const CLUSTER = 'previews';
/** The image-build project's own log group (the stack passes its name as IMAGE_BUILD_LOG_GROUP). */
export const BUILD_LOG_GROUP = '/preview/test/image-builds';
export const INGRESS_DOMAIN = 'previews.example.test';
const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };

export interface Cloud {
  url: string;
  aws: FakeAws;
  /** The fake Kubernetes API behind the EKS cluster, when started with `{ kubernetes: true }`. */
  kube?: FakeKubernetes;
  /**
   * Invoke a Lambda entry (relative to the repository root) with an event, as its trigger would; its
   * context's remaining time starts at `timeoutMs` (a step's Lambda timeout as the stack sets it, any
   * other entry's 60 s, unless given), its request id is new each call.
   */
  invoke<T = unknown>(entry: string, event: unknown, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

/**
 * Start the tier: dynalite with the manifest's tables, the AWS fake, the service's configuration as CDK
 * sets it (plus the endpoint variables), and an HTTP front for the route handlers. `env` adds to or
 * overrides the configuration (the GitHub fake's URL, say).
 */
export async function startCloud(
  env: Record<string, string> = {},
  opts: {
    kubernetes?: boolean;
    /** API groups whose CRDs the fake cluster leaves out (fakes/kubernetes/ `without`): engines not installed. */
    kubernetesWithout?: string[];
  } = {},
): Promise<Cloud> {
  const dir = mkdtempSync(join(tmpdir(), 'preview-cloud-'));
  const dynamo = await startDynalite(join(dir, 'dynamodb'));
  const tableEnv = await ensureTables(dynamo.endpoint);
  const aws = await new FakeAws(REPO_ROOT).start();
  // The image-build project logs to a group of its own (lib/cdk/constructs/image-build-project.ts), named to the functions.
  aws.projectLogGroups.set('preview-images', BUILD_LOG_GROUP);
  // Its buildspec, the template's own: the fake echoes its commands as CodeBuild does.
  aws.projectBuildSpecs.set('preview-images', imageBuildSpec() as never);
  let kube: FakeKubernetes | undefined;
  if (opts.kubernetes) {
    kube = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION, verify: CREDENTIALS },
      autoAdvanceMs: 50,
      ...(opts.kubernetesWithout ? { without: opts.kubernetesWithout } : {}),
    }).start();
    aws.eksLambda.addCluster(CLUSTER, kube);
  }
  const vars: Record<string, string> = {
    ...tableEnv,
    ...aws.endpointEnv(),
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    PREVIEW_MODE: 'aws',
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    ...(kube
      ? {
          EKS_CLUSTER_NAME: CLUSTER,
          // What the stack resolves at deploy time (its eks:DescribeCluster): the fake cluster's API.
          EKS_CLUSTER_ENDPOINT: kube.url,
          EKS_CLUSTER_CA_DATA: kube.caData,
          // Gateway routing (the default) on Envoy Gateway, which enforces protection (SecurityPolicy).
          EKS_GATEWAY_NAME: 'previews',
          EKS_GATEWAY_NAMESPACE: 'envoy-gateway-system',
          EKS_PROTECTION: 'envoy-security-policy',
          // The stack's verifier (its function URL), as the stack sets it on every function calling the cluster.
          ACCESS_VERIFIER_URL: 'https://verify123.lambda-url.eu-west-1.on.aws/',
          EKS_INGRESS_DOMAIN: INGRESS_DOMAIN,
          ROLLOUT_WATCHER_FUNCTION: 'rollout-watcher',
        }
      : {}),
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    STATE_MACHINE_DEPLOY_ARN: machineArn('deploy'),
    STATE_MACHINE_TEARDOWN_ARN: machineArn('teardown'),
    STATE_MACHINE_REDEPLOY_APP_ARN: machineArn('redeployApp'),
    STATE_MACHINE_TEST_RUN_ARN: machineArn('testRun'),
    ARTIFACTS_BUCKET: 'preview-artifacts',
    IMAGE_BUILD_PROJECT: 'preview-images',
    IMAGE_REPOSITORY_URI: IMAGE_REPOSITORY,
    IMAGE_BUILD_LOG_GROUP: BUILD_LOG_GROUP,
    GITHUB_APP_SECRET_ARN,
    SECRET_NAME_PREFIX: 'preview',
    ...env,
  };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  // Nothing local may leak in: these would switch adapters or endpoints.
  for (const k of ['DYNAMODB_ENDPOINT', 'PREVIEW_DATA_DIR', 'PREVIEW_GIT_ROOT']) {
    saved[k] = process.env[k];
    delete process.env[k];
  }
  Object.assign(process.env, vars);

  const { routes } = await import('../../functions/manifest/routes.js');
  const { lambdaContext } = await import('../../functions/shared/aws/lambda-context.js');
  const handlers = new Map<RouteId, LambdaHandler>();
  for (const [id, def] of Object.entries(routes) as [RouteId, (typeof routes)[RouteId]][]) {
    const mod = (await import(pathToFileURL(join(REPO_ROOT, def.entry)).href)) as { handler: LambdaHandler };
    handlers.set(id, mod.handler);
  }
  await aws.workflows.preload();
  const compiled = compileRoutes(routes);
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const url = new URL(req.url ?? '/', 'http://localhost');
    const match = matchRoute(compiled, req.method ?? 'GET', url.pathname);
    if (!match) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'route not found' }));
      return;
    }
    const event = toProxyEvent(req, url, match.route, match.params, Buffer.concat(chunks));
    const result = await handlers.get(match.route.id)!(
      event,
      lambdaContext(match.route.id, event.requestContext.requestId),
    );
    res.writeHead(
      result.statusCode,
      Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)])),
    );
    res.end(result.body);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  let invocations = 0;
  // A step's Lambda has the timeout the stack gives it (its state's TimeoutSeconds less the margin: 890 s
  // for the run executor), which the executor budgets its run from; any other entry 60 s unless given.
  const stepSeconds = stepTimeouts();
  const invoke = async <T>(
    entry: string,
    event: unknown,
    timeoutMs = (stepSeconds.get(entry) ?? 60) * 1000,
  ): Promise<T> => {
    const mod = (await import(pathToFileURL(join(REPO_ROOT, entry)).href)) as {
      handler: (e: unknown, c: Context) => Promise<T>;
    };
    return mod.handler(event, lambdaContext(entry, `invoke-${Date.now()}-${++invocations}`, timeoutMs));
  };
  // The rollout watcher, invoked asynchronously through the fake Lambda API (with a short time slice, so
  // its hand-over to itself is exercised too).
  aws.eksLambda.addFunction('rollout-watcher', (event) =>
    invoke('functions/watchers/rollout.ts', event, 20_000),
  );
  return {
    url,
    aws,
    kube,
    invoke,
    async stop() {
      // The registry's warm browser (LambdaChromium, launched by a run) outlives the file otherwise: its
      // Chromium kept Jest from exiting after the tier. Made if no run made it: a construction, no launch.
      const registry = await import(
        pathToFileURL(join(REPO_ROOT, 'functions/ports/registry/browser.ts')).href
      );
      await Promise.resolve()
        .then(() => (registry.browser() as { stop?: () => Promise<void> }).stop?.())
        .catch(() => undefined);
      await new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
      await aws.stop();
      await kube?.stop();
      await dynamo.stop();
      rmSync(dir, { recursive: true, force: true });
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    },
  };
}
