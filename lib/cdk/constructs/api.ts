import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import {
  type PageDef,
  pages,
  type RouteDef,
  type RouteId,
  routeIds,
  routes,
} from '../../../functions/manifest/routes.js';
import type { AccessResources, ClusterSettings, SourceHostResources } from '../access.js';
import { clusterRouteIds } from '../cluster.js';
import { keepStackLevelIds } from '../logical-ids.js';
import { acknowledge } from '../nag.js';
import { pascal } from '../stateful-stack.js';
import { entryFunction, type FunctionDefaults } from './entry-function.js';
import type { ServiceFunction } from './service-function.js';

type PageId = keyof typeof pages;

/** The REST API settings of StatelessStack. */
export interface ApiOptions {
  /** API Gateway stage (the first path segment of the API URL). @default 'api' */
  apiStageName?: string;
  /**
   * Steady-state requests per second across the API (every organization together; each organization's
   * own share is functions/core/fair-share.ts). At ~50 ms a request, 1,000/s keeps about 50 API functions
   * busy, well within the account's default Lambda concurrency (docs/scale.md). @default 1000
   */
  throttlingRateLimit?: number;
  /** Requests the API takes in a burst above the steady rate. @default 2000 */
  throttlingBurstLimit?: number;
  /**
   * Create the account-level role API Gateway needs to write access logs (AWS::ApiGateway::Account).
   * Turn off when the account already has one configured. @default true
   */
  apiGatewayCloudWatchRole?: boolean;
  /**
   * Each organization's fair share (functions/core/fair-share.ts; 0 turns a limit off), set on every route
   * function as PREVIEW_ORG_REQUESTS_PER_SECOND, PREVIEW_ORG_CONCURRENT_DEPLOYS, PREVIEW_ORG_CONCURRENT_RUNS.
   * @default - the functions' defaults: 20 requests/s, 20 deploys and 10 runs in flight
   */
  fairShare?: FairShare;
}

/** Each organization's limits (docs/scale.md). */
export interface FairShare {
  /** API requests per second, counted in 10-second windows. @default 20 */
  requestsPerSecond?: number;
  /** Environments pending, building or deploying at once. @default 20 */
  concurrentDeploys?: number;
  /** Test runs pending or running at once. @default 10 */
  concurrentRuns?: number;
}

/** The route functions' environment for `fairShare` (only what was set). */
export function fairShareEnvironment(share: FairShare = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [value, name] of [
    [share.requestsPerSecond, 'PREVIEW_ORG_REQUESTS_PER_SECOND'],
    [share.concurrentDeploys, 'PREVIEW_ORG_CONCURRENT_DEPLOYS'],
    [share.concurrentRuns, 'PREVIEW_ORG_CONCURRENT_RUNS'],
  ] as const) {
    if (value === undefined) continue;
    if (!Number.isFinite(value) || value < 0)
      throw new Error(`fairShare: ${name} must be a number >= 0 (got ${value})`);
    env[name] = String(value);
  }
  return env;
}

export interface ApiProps extends ApiOptions {
  /** What every route and page function is built with. */
  functions: FunctionDefaults;
  /** What a route's access may refer to (the state machines included). */
  resources: AccessResources;
  /** The GitHub App: the webhook route checks deliveries' signatures with its webhookSecret. */
  sourceHost: SourceHostResources;
  /** The cluster: the routes with `logs` access read pods' logs from it. @default - no cluster */
  cluster?: ClusterSettings;
}

/**
 * The API: owns one function per route and per page of functions/manifest/routes.ts (the manifest the
 * local server also runs, so the two APIs cannot drift), each granted what its entry declares (and the
 * tenancy table, read by authentication), and the REST API in front of them: one resource tree, no
 * authorizer (authentication happens in the handlers), the service's `{ "error": … }` shape for the
 * errors API Gateway answers itself, access logs (no bodies) and X-Ray traces. The REST API keeps its
 * stack-level logical ids: its id is the API's URL, which clients and the GitHub App's webhook hold.
 */
export class Api extends Construct {
  /** The REST API (output `ApiUrl`). */
  readonly restApi: apigateway.RestApi;
  /** One function per route. */
  readonly routeFunctions = {} as Record<RouteId, ServiceFunction>;
  /** One function per page (HTML behind a signed, expiring link; the handler checks it). */
  readonly pageFunctions = {} as Record<PageId, ServiceFunction>;
  /** The stage's access log: one JSON line per request (`accessLogFormat`). */
  readonly accessLogs: logs.LogGroup;

  constructor(scope: Construct, id: string, props: ApiProps) {
    super(scope, id);
    for (const routeId of routeIds) {
      const route: RouteDef = routes[routeId];
      const fn = entryFunction(this, `${pascal(routeId)}Route`, props.functions, {
        entry: route.entry,
        kind: 'api',
        access: route.access,
        description: `${route.method} ${route.path}`,
        tag: ['preview:route', routeId],
      }).bindAccess(
        // Tenancy is read by all (authentication), each organization's request counters written by all
        // (functions/core/fair-share.ts, in the middleware of every route), the rest per route.
        { ...route.access, tables: { tenancy: 'R', quotas: 'RW', ...route.access.tables } },
        props.resources,
      );
      for (const [name, value] of Object.entries(fairShareEnvironment(props.fairShare)))
        fn.addEnvironment(name, value);
      // A GitHub webhook is authenticated by its signature, under the App secret's webhookSecret.
      if (route.auth === 'githubWebhook') fn.bindSourceHost(props.sourceHost);
      // Reading pods' logs calls the cluster's API (DescribeCluster, an access entry).
      if (props.cluster && clusterRouteIds.includes(routeId)) fn.bindClusterAccess(props.cluster);
      this.routeFunctions[routeId] = fn;
    }
    for (const [pageId, page] of Object.entries(pages) as [PageId, PageDef][]) {
      this.pageFunctions[pageId] = entryFunction(this, `${pascal(pageId)}Page`, props.functions, {
        entry: page.entry,
        kind: 'api',
        access: page.access,
        description: `${page.method} ${page.path}`,
        tag: ['preview:page', pageId],
        files: page.files,
      }).bindAccess(page.access, props.resources);
    }

    this.accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: props.functions.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    keepStackLevelIds(this.accessLogs);
    this.restApi = new apigateway.RestApi(this, 'Api', {
      restApiName: Stack.of(this).stackName,
      description: 'Preview environments, secret bundles, scenario recipes and test runs',
      endpointTypes: [apigateway.EndpointType.REGIONAL],
      cloudWatchRole: props.apiGatewayCloudWatchRole ?? true,
      deployOptions: {
        stageName: props.apiStageName ?? 'api',
        throttlingRateLimit: props.throttlingRateLimit ?? 1000,
        throttlingBurstLimit: props.throttlingBurstLimit ?? 2000,
        tracingEnabled: true,
        metricsEnabled: true,
        // Execution logs and data traces would include request bodies (secret values); access logs only.
        loggingLevel: apigateway.MethodLoggingLevel.OFF,
        dataTraceEnabled: false,
        accessLogDestination: new apigateway.LogGroupLogDestination(this.accessLogs),
        accessLogFormat: accessLogFormat(),
      },
    });
    const entries: [RouteDef | PageDef, ServiceFunction][] = [
      ...routeIds.map((r): [RouteDef, ServiceFunction] => [routes[r], this.routeFunctions[r]]),
      ...(Object.keys(pages) as PageId[]).map((p): [PageDef, ServiceFunction] => [
        pages[p],
        this.pageFunctions[p],
      ]),
    ];
    for (const [entry, fn] of entries) {
      this.restApi.root
        .resourceForPath(entry.path)
        .addMethod(entry.method, new apigateway.LambdaIntegration(fn, { allowTestInvoke: false }), {
          authorizationType: apigateway.AuthorizationType.NONE,
        });
    }
    addErrorResponses(this.restApi);
    acknowledgeApiFindings(this.restApi);
    keepStackLevelIds(this.restApi);
  }
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
