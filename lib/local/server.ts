import '../../functions/shared/polyfills.js';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { createOrganization, type OrgCredentials } from '../../functions/core/tenancy.js';
import { type RouteId, routes } from '../../functions/manifest/routes.js';
import { lambdaContext } from '../../functions/shared/lambda-context.js';
import { log } from '../../functions/shared/log.js';
import { installLocalAdapters, type LocalAdapterHandles } from './adapters.js';
import { ensureTables, startDynalite } from './dynalite.js';
import { compileRoutes, matchRoute, toProxyEvent } from './http-bridge.js';
import { recoverEnvironments } from './recovery.js';

export const REPO_ROOT = resolve(new URL('../..', import.meta.url).pathname);
const MAX_BODY = 10 * 1024 * 1024; // API Gateway's payload limit

type LambdaHandler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

export interface LocalOptions {
  /** Where dynalite, secrets, logs and credentials live. @default `./.preview-data` */
  dataDir?: string;
  /** Folder of `owner/repo` git repositories. @default `<dataDir>/repos` */
  gitRoot?: string;
  /** @default 3000; 0 picks a free port */
  port?: number;
  /** @default 127.0.0.1 */
  host?: string;
}

export interface LocalService {
  url: string;
  port: number;
  dataDir: string;
  /** The organization created on first start (read back from credentials.json on later starts). */
  credentials: OrgCredentials;
  credentialsPath: string;
  /** The in-process state machine runner (tests wait on `idle()`). */
  workflows: LocalAdapterHandles['workflows'];
  /** The local process runtime (tests look at app processes). */
  runtime: ReturnType<LocalAdapterHandles['runtime']>;
  /** What the start did with environments the previous run left (their work continues in the background). */
  recovered: Awaited<ReturnType<typeof recoverEnvironments>>;
  stop(): Promise<void>;
}

/** The file the CLI reads to reach the running server's dynalite. */
export const serverInfoPath = (dataDir: string) => join(dataDir, 'server.json');

/**
 * Point this process at a local data dir: start dynalite, create the tables, set the same env vars CDK
 * sets on the Lambdas (plus `PREVIEW_MODE=local`), and install the local adapters. Shared by the server
 * and the CLI.
 */
export async function bootLocalRuntime(opts: {
  dataDir: string;
  gitRoot?: string;
  dynamodbEndpoint?: string;
}) {
  const dataDir = resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // Local mode runs on Node 20 by design; the lockfile pins SDK releases that support it (Lambda runs 22+).
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const dynamo = opts.dynamodbEndpoint
    ? { endpoint: opts.dynamodbEndpoint, stop: async () => undefined }
    : await startDynalite(join(dataDir, 'dynamodb'));
  const tableEnv = await ensureTables(dynamo.endpoint);
  Object.assign(process.env, tableEnv, {
    PREVIEW_MODE: 'local',
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    PREVIEW_DATA_DIR: dataDir,
    PREVIEW_GIT_ROOT: resolve(opts.gitRoot ?? join(dataDir, 'repos')),
  });
  const adapters: LocalAdapterHandles = installLocalAdapters(REPO_ROOT);
  return { dataDir, dynamo, adapters };
}

async function firstStartCredentials(
  dataDir: string,
): Promise<{ credentials: OrgCredentials; path: string }> {
  const path = join(dataDir, 'credentials.json');
  if (existsSync(path))
    return { credentials: JSON.parse(readFileSync(path, 'utf8')) as OrgCredentials, path };
  const credentials = await createOrganization('default');
  writeFileSync(path, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  return { credentials, path };
}

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => resolveBody(size > MAX_BODY ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/**
 * Start the whole service locally: the same Lambda handlers as in AWS behind a real HTTP server, both
 * route groups on one base URL, dynalite persisted under the data dir, state machines run in-process.
 */
export async function startLocal(opts: LocalOptions = {}): Promise<LocalService> {
  const dataDir = resolve(opts.dataDir ?? '.preview-data');
  const { dynamo, adapters } = await bootLocalRuntime({ dataDir, gitRoot: opts.gitRoot });

  const handlers = new Map<RouteId, LambdaHandler>();
  for (const [id, def] of Object.entries(routes) as [RouteId, (typeof routes)[RouteId]][]) {
    const mod = (await import(pathToFileURL(join(REPO_ROOT, def.entry)).href)) as { handler: LambdaHandler };
    handlers.set(id, mod.handler);
  }
  const compiled = compileRoutes(routes);
  const { credentials, path: credentialsPath } = await firstStartCredentials(dataDir);

  // Before the first request: environments the previous run left in flight or running are claimed and
  // their work restarted, so no caller ever reads a `ready` whose apps are not running. The work itself
  // (rebuilds, restarts) runs in the background and reports through the environment's status.
  await adapters.workflows.preload();
  const recovered = await recoverEnvironments(adapters.workflows, adapters.runtime());

  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
      if (req.method === 'GET' && url.pathname === '/healthz') return send(res, 200, { status: 'ok' });
      const body = await readBody(req);
      if (!body) return send(res, 413, { error: 'request body too large' });
      const match = matchRoute(compiled, req.method ?? 'GET', url.pathname);
      if (!match) return send(res, 404, { error: 'route not found' });
      const event = toProxyEvent(req, url, match.route, match.params, body);
      const requestId = event.requestContext.requestId;
      const result = await handlers.get(match.route.id)!(event, lambdaContext(match.route.id, requestId));
      const headers = Object.fromEntries(
        Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)]),
      );
      send(res, result.statusCode, result.body ?? '', { ...headers, 'x-request-id': requestId });
    } catch (err) {
      log.error('local server error', { name: (err as Error).name });
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
      else res.end();
    }
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(opts.port ?? 3000, opts.host ?? '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;
  writeFileSync(
    serverInfoPath(dataDir),
    JSON.stringify({ pid: process.pid, url, dynamodbEndpoint: dynamo.endpoint }),
    { mode: 0o600 },
  );

  let stopped = false;
  return {
    url,
    port,
    dataDir,
    credentials,
    credentialsPath,
    workflows: adapters.workflows,
    runtime: adapters.runtime(),
    recovered,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
      await adapters.stop();
      await dynamo.stop();
      rmSync(serverInfoPath(dataDir), { force: true });
    },
  };
}
