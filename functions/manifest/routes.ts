/**
 * The route manifest: the one list of API routes, read by the CDK API construct (one NodejsFunction per
 * route, least-privilege grants from `access`) and by the local HTTP server (same handlers, same paths).
 * A route that exists locally exists in the cloud, and the other way round. Plain data: importing it
 * pulls in no handler code.
 */
import type { RouteAccess } from './access.js';

export type { RouteAccess } from './access.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
/**
 * `apiKey`: `Authorization: Bearer <API key>`. `client`: `svc-client-id` + `svc-client-secret` headers.
 * `githubWebhook`: `X-Hub-Signature-256`, the HMAC-SHA256 of the raw body under the GitHub App's webhook
 * secret (the sender is GitHub, acting for no one organization).
 */
export type AuthKind = 'apiKey' | 'client' | 'githubWebhook';

export interface RouteDef {
  method: HttpMethod;
  /** API Gateway resource path; `{name}` segments become path parameters. */
  path: string;
  /** Handler module, relative to the repository root; it exports `handler`. */
  entry: string;
  auth: AuthKind;
  access: RouteAccess;
  /**
   * Largest request body in bytes, as received (before any decoding or parsing). api/route.ts enforces
   * it after authentication, in Lambda and locally alike: 413 `{"error": ...}` above it.
   * @default DEFAULT_MAX_BODY_BYTES
   */
  maxBodyBytes?: number;
}

/**
 * Body cap of a route that names none: 64 KB, ample for every JSON body but the ones below. (The local
 * server's transport cap, API Gateway's 10 MB, applies before any route.)
 */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
/** Secret upserts: 4 × the 64 KB bundle limit, room for JSON escapes and formatting of a full bundle. */
const SECRET_BODY_BYTES = 256 * 1024;
/** GitHub webhook payloads: GitHub caps them at 25 MB; API Gateway's 10 MB applies first. */
const GITHUB_WEBHOOK_BODY_BYTES = 10 * 1024 * 1024;

/**
 * What both secret upserts (PUT many, PUT one) are: bundles written, environments read (the apps they
 * declare, for the answer's `warning`: core/environments/declared-apps.ts), and room for a full bundle.
 */
const SECRET_UPSERT = {
  auth: 'apiKey',
  access: { tables: { applications: 'R', environments: 'R', secretBundles: 'RW' }, secrets: 'RW' },
  maxBodyBytes: SECRET_BODY_BYTES,
} as const;

const envPath = '/v1/preview/environments/{owner}/{repo}/{pr}';
const secretsPath = '/v1/preview/secrets/{applicationId}/{app}';

export const routes = {
  createEnvironment: {
    method: 'POST',
    path: '/v1/preview/environments',
    entry: 'functions/api/environments/create.ts',
    auth: 'apiKey',
    // The repository must be linked to an application of the caller's organization (`byRepo`).
    access: { tables: { applications: 'R', environments: 'RW' }, starts: ['deploy'] },
  },
  deployMainBranch: {
    method: 'POST',
    path: '/v1/preview/applications/{applicationId}/0',
    entry: 'functions/api/environments/deploy-main.ts',
    auth: 'apiKey',
    access: { tables: { applications: 'R', environments: 'RW' }, starts: ['deploy'], sourceHost: true },
  },
  listApplications: {
    method: 'GET',
    path: '/v1/preview/applications',
    entry: 'functions/api/applications/list.ts',
    auth: 'apiKey',
    access: { tables: { applications: 'R' } },
  },
  updateApplication: {
    method: 'PATCH',
    path: '/v1/preview/applications/{applicationId}',
    entry: 'functions/api/applications/update.ts',
    auth: 'apiKey',
    // tenancy: the repository link is recorded again (`updateApplication`); secrets: the access key is
    // made when `access` is set and the application has none (the front door).
    access: { tables: { applications: 'RW', tenancy: 'RW' }, secrets: 'RW' },
  },
  listEnvironments: {
    method: 'GET',
    path: '/v1/preview/environments',
    entry: 'functions/api/environments/list.ts',
    auth: 'apiKey',
    // Each pull request's merge gate: its record (tenancy) and the runs its title counts.
    access: { tables: { environments: 'R', tenancy: 'R', runs: 'R' } },
  },
  getEnvironment: {
    method: 'GET',
    path: envPath,
    entry: 'functions/api/environments/get.ts',
    auth: 'apiKey',
    // A protected environment's `accessUrls` are signed with its application's access key (secrets);
    // its merge gate: the record (tenancy) and the runs its title counts.
    access: { tables: { environments: 'R', applications: 'R', tenancy: 'R', runs: 'R' }, secrets: 'R' },
  },
  teardownEnvironment: {
    method: 'DELETE',
    path: envPath,
    entry: 'functions/api/environments/teardown.ts',
    auth: 'apiKey',
    access: { tables: { environments: 'RW' }, starts: ['teardown'] },
  },
  redeployEnvironment: {
    method: 'PATCH',
    path: envPath,
    entry: 'functions/api/environments/redeploy.ts',
    auth: 'apiKey',
    access: { tables: { environments: 'RW' }, starts: ['deploy'] },
  },
  redeployApp: {
    method: 'PATCH',
    path: `${envPath}/apps/{app}`,
    entry: 'functions/api/environments/redeploy-app.ts',
    auth: 'apiKey',
    access: { tables: { environments: 'RW' }, starts: ['redeployApp'] },
  },
  skipGate: {
    method: 'POST',
    path: `${envPath}/gate/skip`,
    entry: 'functions/api/environments/gate-skip.ts',
    auth: 'apiKey',
    // The merge gate's record (tenancy) and the runs its output tells; prStatus: the check run's PATCH.
    access: { tables: { environments: 'R', tenancy: 'RW', runs: 'R' }, prStatus: true, gateLinks: true },
  },
  getGate: {
    method: 'GET',
    path: `${envPath}/gate`,
    entry: 'functions/api/environments/gate.ts',
    auth: 'apiKey',
    // The merge gate's record (tenancy), the runs it tells, their report links (the link key only).
    access: { tables: { environments: 'R', tenancy: 'R', runs: 'R' }, gateLinks: true },
  },
  getAppLogs: {
    method: 'GET',
    path: `${envPath}/apps/{app}/logs`,
    entry: 'functions/api/environments/logs.ts',
    auth: 'apiKey',
    // Reads the app's pods' logs (the cluster) or its build's (CloudWatch Logs), and its secret bundle to
    // mask them.
    access: { tables: { environments: 'R', applications: 'R', builds: 'R' }, secrets: 'R', logs: true },
  },
  listSecrets: {
    method: 'GET',
    path: secretsPath,
    entry: 'functions/api/secrets/list.ts',
    auth: 'apiKey',
    access: { tables: { applications: 'R', secretBundles: 'R' } },
  },
  putSecrets: {
    method: 'PUT',
    path: secretsPath,
    entry: 'functions/api/secrets/put-many.ts',
    ...SECRET_UPSERT,
  },
  putSecret: {
    method: 'PUT',
    path: `${secretsPath}/{key}`,
    entry: 'functions/api/secrets/put-one.ts',
    ...SECRET_UPSERT,
  },
  deleteSecret: {
    method: 'DELETE',
    path: `${secretsPath}/{key}`,
    entry: 'functions/api/secrets/delete-one.ts',
    auth: 'apiKey',
    access: { tables: { applications: 'R', secretBundles: 'RW' }, secrets: 'RW' },
  },
  createRecipeVersion: {
    method: 'POST',
    path: '/v1/setup/setups/{setupId}/scenario-recipe-versions',
    entry: 'functions/api/recipes/create-version.ts',
    auth: 'apiKey',
    access: { tables: { recipes: 'RW' } },
    // = MAX_RECIPES_FILE_BYTES of core/recipes/versions.ts (a unit test holds them equal)
    maxBodyBytes: 350 * 1024,
  },
  listRecipeVersions: {
    method: 'GET',
    path: '/v1/setup/setups/{setupId}/scenario-recipe-versions',
    entry: 'functions/api/recipes/list-versions.ts',
    auth: 'apiKey',
    access: { tables: { recipes: 'R' } },
  },
  getRecipeVersion: {
    method: 'GET',
    path: '/v1/setup/setups/{setupId}/scenario-recipe-versions/{version}',
    entry: 'functions/api/recipes/get-version.ts',
    auth: 'apiKey',
    access: { tables: { recipes: 'R' } },
  },
  startRun: {
    method: 'POST',
    path: '/test/{test_id}/run',
    entry: 'functions/api/runs/start.ts',
    auth: 'client',
    access: { tables: { tests: 'R', runs: 'RW' }, starts: ['testRun'], media: 'R' },
  },
  listRuns: {
    method: 'GET',
    path: '/run',
    entry: 'functions/api/runs/list.ts',
    auth: 'client',
    access: { tables: { runs: 'R' }, media: 'R' },
  },
  getRun: {
    method: 'GET',
    path: '/run/{run_id}',
    entry: 'functions/api/runs/get.ts',
    auth: 'client',
    access: { tables: { runs: 'R' }, media: 'R' },
  },
  listTests: {
    method: 'GET',
    path: '/test',
    entry: 'functions/api/tests/list.ts',
    auth: 'client',
    access: { tables: { tests: 'R' } },
  },
  getTest: {
    method: 'GET',
    path: '/test/{test_id}',
    entry: 'functions/api/tests/get.ts',
    auth: 'client',
    access: { tables: { tests: 'R' } },
  },
  quarantineTest: {
    method: 'PUT',
    path: '/test/{test_id}/quarantine',
    entry: 'functions/api/tests/quarantine.ts',
    auth: 'client',
    // The merge gate's quarantines live in tenancy (core/gate/quarantine.ts); the application's
    // run_on_preview tests set the cap.
    access: { tables: { tests: 'R', applications: 'R', tenancy: 'RW' } },
  },
  unquarantineTest: {
    method: 'DELETE',
    path: '/test/{test_id}/quarantine',
    entry: 'functions/api/tests/unquarantine.ts',
    auth: 'client',
    access: { tables: { tests: 'R', tenancy: 'RW' } },
  },
  listQuarantined: {
    method: 'GET',
    path: '/quarantine',
    entry: 'functions/api/tests/quarantined.ts',
    auth: 'client',
    access: { tables: { tests: 'R', applications: 'R', tenancy: 'R' } },
  },
  githubWebhook: {
    method: 'POST',
    path: '/v1/github/webhooks',
    entry: 'functions/api/github/webhooks.ts',
    auth: 'githubWebhook',
    // Reads the webhook secret (GitHub App secret), checks installations, publishes to the service bus;
    // environments: whether a pull request the preview rules skip has a preview to tear down;
    // sourceHost also lists a pull request's files for an application's `paths` rule.
    access: {
      tables: { applications: 'R', deliveries: 'RW', environments: 'R' },
      sourceHost: true,
      publishes: true,
    },
    maxBodyBytes: GITHUB_WEBHOOK_BODY_BYTES,
  },
} as const satisfies Record<string, RouteDef>;

export type RouteId = keyof typeof routes;
export const routeIds = Object.keys(routes) as RouteId[];

/**
 * Pages: HTML for a person's browser, with no credentials: the signed, expiring link is the authorization
 * (403 for a bad signature, 410 once expired), checked by the handler. Not JSON routes, so outside the
 * middleware stack. CDK serves each as an API Gateway route with its own function; the local server
 * serves the same paths (lib/local/media-routes.ts).
 */
export interface PageDef {
  method: 'GET';
  path: string;
  entry: string;
  access: RouteAccess;
  /**
   * Folders (relative to the repository root) copied beside the page's bundle at the same paths: static
   * files it serves, which esbuild does not bundle.
   */
  files?: readonly string[];
}

export const pages = {
  runReport: {
    method: 'GET',
    path: '/report/{run_id}',
    entry: 'functions/api/runs/report.ts',
    access: { tables: { runs: 'R' }, media: 'R' },
  },
  /**
   * The merge gate of one head commit: the page a check run's details_url opens in AWS (signed, like a
   * run report's link; core/gate/page.ts). Its record (tenancy), its runs and their report links.
   */
  gatePage: {
    method: 'GET',
    path: '/gate/{org_id}/{owner}/{repo}/{pr}/{sha}',
    entry: 'functions/api/environments/gate-page.ts',
    access: { tables: { tenancy: 'R', runs: 'R' }, media: 'R' },
  },
  /**
   * The Playwright trace viewer: the static app of playwright-core, which opens a run's trace
   * from its signed media URL in the browser. No data, no credentials, no grant: it reads its own files
   * (functions/core/runs/trace-viewer.ts; locally lib/local/trace-viewer.ts serves the same path).
   */
  traceViewer: {
    method: 'GET',
    path: '/trace-viewer/{proxy+}',
    entry: 'functions/api/runs/trace-viewer.ts',
    access: { tables: {} },
    files: ['node_modules/playwright-core/lib/vite/traceViewer'],
  },
} as const satisfies Record<string, PageDef>;
