import '../../functions/shared/polyfills.js';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { createOrganization, type OrgCredentials } from '../../functions/core/applications/index.js';
import { schedules } from '../../functions/manifest/events.js';
import { type RouteId, routes } from '../../functions/manifest/routes.js';
import {
  ensureLocalWebhookSecret,
  type LocalWebhookSecretSource,
} from '../../functions/ports/webhook-secret/local-file.js';
import { lambdaContext } from '../../functions/shared/aws/lambda-context.js';
import { config, defaultPublicUrl } from '../../functions/shared/config.js';
import { log } from '../../functions/shared/log.js';
import { ensurePrivateDir } from '../../functions/shared/private-dir.js';
import { HOST_RE } from '../../functions/shared/validation.js';
import { installLocalAdapters, type LocalAdapterHandles } from './adapters.js';
import { type Inbox, startInbox } from './bus.js';
import { dashboardHtml } from './dashboard.js';
import { acquireDataDirLock, type DataDirLock } from './data-dir-lock.js';
import { ensureTables, localTableEnv, startDynalite } from './dynalite.js';
import { type ExpiryTimer, startExpiryTimer } from './expiry-timer.js';
import { compileRoutes, matchRoute, toProxyEvent } from './http-bridge.js';
import { serveSigned } from './media-routes.js';
import { recoverEnvironments } from './recovery.js';
import { serveTraceViewer } from './trace-viewer.js';

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
  /** The data dir's lock when the caller took it already (bin/start.ts does, before its port check). */
  lock?: DataDirLock;
}

export interface LocalService {
  url: string;
  port: number;
  dataDir: string;
  /** The organization created on first start (read back from credentials.json on later starts). */
  credentials: OrgCredentials;
  credentialsPath: string;
  /** Where the local source host finds repositories (`<gitRoot>/<owner>/<repo>`, PREVIEW_GIT_ROOT). */
  gitRoot: string;
  /** The in-process state machine runner (tests wait on `idle()`). */
  workflows: LocalAdapterHandles['workflows'];
  /** The local process runtime (tests look at app processes). */
  runtime: ReturnType<LocalAdapterHandles['runtime']>;
  /** What the start did with environments the previous run left (their work continues in the background). */
  recovered: Awaited<ReturnType<typeof recoverEnvironments>>;
  /** The in-process event bus (tests wait on `idle()`), its inbox for `previewctl events put`. */
  bus: LocalAdapterHandles['bus'];
  inbox: Inbox;
  /** The expiry sweep's timer (tests run a sweep with `runNow()`). */
  expiry: ExpiryTimer & { everySeconds: number };
  /** Where the GitHub webhook secret comes from (printed at start: `webhookStartupLines`). */
  webhookSecret: LocalWebhookSecretSource;
  stop(): Promise<void>;
}

/**
 * Where the local server's dynalite listens: a Unix socket in the private data dir (sandboxed builds and
 * apps share the loopback network, not the data dir). Socket paths are limited to 107 bytes; a data dir
 * too deep for that gets its socket in a private temp dir instead.
 */
function dynamoSocket(dataDir: string): string {
  const inDataDir = join(dataDir, 'dynamodb.sock');
  if (Buffer.byteLength(inDataDir) < 100) return inDataDir;
  return join(mkdtempSync(join(tmpdir(), 'preview-db-')), 'dynamodb.sock');
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
  // Private (0700, ours, not a symlink; a looser mode is tightened), before anything is written there.
  ensurePrivateDir(dataDir, 'data dir');
  // Node 22 is the requirement, and local mode still runs on Node 20: no SDK notice about it on stderr.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const dynamo = opts.dynamodbEndpoint
    ? { endpoint: opts.dynamodbEndpoint, stop: async () => undefined }
    : await startDynalite(join(dataDir, 'dynamodb'), { socket: dynamoSocket(dataDir) });
  // Another process's dynalite (the running server's): its tables are its own to create or migrate.
  const tableEnv = opts.dynamodbEndpoint ? localTableEnv() : await ensureTables(dynamo.endpoint);
  const gitRoot = resolve(opts.gitRoot ?? join(dataDir, 'repos'));
  Object.assign(process.env, tableEnv, {
    PREVIEW_MODE: 'local',
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    PREVIEW_DATA_DIR: dataDir,
    PREVIEW_GIT_ROOT: gitRoot,
  });
  const adapters: LocalAdapterHandles = installLocalAdapters(REPO_ROOT);
  return { dataDir, dynamo, adapters, gitRoot };
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

const NO_BODY = Buffer.alloc(0);

/** The body, or `too-large` past the transport cap (read to its end), or `aborted` when the client left. */
function readBody(req: IncomingMessage): Promise<Buffer | 'too-large' | 'aborted'> | Buffer {
  // A request that declares no body (no Transfer-Encoding, no or a zero Content-Length) has none: HTTP/1.1
  // frames a body only by those headers. No need to wait for the stream's end (a status poll's case).
  const length = req.headers['content-length'];
  // Not even `req.resume()`: the server discards an unread request once the response ends.
  if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0'))
    return NO_BODY;
  return new Promise((resolveBody) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => resolveBody(size > MAX_BODY ? 'too-large' : Buffer.concat(chunks)));
    req.on('close', () => {
      if (!req.complete) resolveBody('aborted');
    });
    // The request stream fails only when the client does (a reset mid-body: `aborted`, ECONNRESET): that
    // is the client leaving, not a server error to log.
    req.on('error', () => resolveBody('aborted'));
  });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : `${JSON.stringify(body)}\n`);
}

/**
 * The path and query of a request target. Origin form (`/path?query`) is read against a fixed origin, so
 * neither the `Host` header nor a `//host/…` path can change what is parsed; absolute form
 * (`http://host/path`) is accepted as HTTP allows. Anything else is undefined (→ 400).
 */
function targetOf(raw: string): URL | undefined {
  try {
    if (raw.startsWith('/')) return new URL(`http://localhost${raw}`);
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

/** A raw JSON error answer on a socket Node's HTTP parser refused (no request object exists). */
function socketError(status: number, reason: string, error: string): string {
  const body = `${JSON.stringify({ error })}\n`;
  return [
    `HTTP/1.1 ${status} ${reason}`,
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    '',
    body,
  ].join('\r\n');
}

/**
 * Start the whole service locally: the same Lambda handlers as in AWS behind a real HTTP server, both
 * route groups on one base URL, dynalite persisted under the data dir, state machines run in-process.
 */
export async function startLocal(opts: LocalOptions = {}): Promise<LocalService> {
  const dataDir = resolve(opts.dataDir ?? '.preview-data');
  // One server per data dir (lib/local/data-dir-lock.ts): refused here, before anything is touched.
  const lock = opts.lock ?? takeDataDir(dataDir);
  try {
    return await startLocked(opts, dataDir, lock);
  } catch (err) {
    lock.release();
    throw err;
  }
}

/** Take `dataDir` for a server (created private when missing). Throws DataDirInUseError when in use. */
export function takeDataDir(dataDir: string): DataDirLock {
  ensurePrivateDir(dataDir, 'data dir');
  return acquireDataDirLock(dataDir, 'npm start');
}

async function startLocked(opts: LocalOptions, dataDir: string, lock: DataDirLock): Promise<LocalService> {
  const { dynamo, adapters, gitRoot } = await bootLocalRuntime({ dataDir, gitRoot: opts.gitRoot });

  // Route handlers load as Lambda loads them: on the first request of their route (a cold start), one
  // module at a time (concurrent first imports of shared modules trip Jest's ESM loader). Every one is
  // also loaded in the background right after the server listens, so later first requests find it ready.
  const handlers = new Map<RouteId, Promise<LambdaHandler>>();
  let importing: Promise<unknown> = Promise.resolve();
  const handlerOf = (id: RouteId): Promise<LambdaHandler> => {
    let handler = handlers.get(id);
    if (!handler) {
      const url = pathToFileURL(join(REPO_ROOT, routes[id].entry)).href;
      handler = importing.then(async () => ((await import(url)) as { handler: LambdaHandler }).handler);
      importing = handler.catch(() => undefined);
      handlers.set(id, handler);
    }
    return handler;
  };
  const warmUp = () => Promise.all((Object.keys(routes) as RouteId[]).map(handlerOf));
  const compiled = compileRoutes(routes);
  // The OpenAPI document of these very handlers (no credentials needed to read it), built on first ask.
  let openApi: Promise<unknown> | undefined;
  // The state machines and their step modules load while the first start's organization is written.
  const [{ credentials, path: credentialsPath }] = await Promise.all([
    firstStartCredentials(dataDir),
    adapters.workflows.preload(),
  ]);

  // Before the first request: environments the previous run left in flight or running are claimed and
  // their work restarted, so no caller ever reads a `ready` whose apps are not running. The work itself
  // (rebuilds, restarts) runs in the background and reports through the environment's status.
  const recovered = await recoverEnvironments(adapters.workflows, adapters.runtime());

  // Previews that follow the pull request: the webhook secret (generated on first start unless
  // PREVIEW_GITHUB_WEBHOOK_SECRET is set), the inbox of `previewctl events put`, the expiry sweep.
  const webhookSecret = ensureLocalWebhookSecret(dataDir, config().events.localWebhookSecret);
  const inbox = startInbox(dataDir, adapters.bus);
  const everySeconds = config().events.expirySweepSeconds ?? schedules.expirySweep.localEverySeconds;
  const expiry = Object.assign(startExpiryTimer({ repoRoot: REPO_ROOT, everySeconds }), { everySeconds });

  // Every answer is JSON `{ "error": ... }`, from the handlers and from the transport alike: the Host
  // check is ours (not Node's bare 400), and so are the answers to requests Node's parser refuses.
  const server = createServer({ requireHostHeader: false }, async (req, res) => {
    try {
      const host = req.headers.host;
      if (host === undefined && req.httpVersion === '1.1')
        return send(res, 400, { error: 'missing Host header' });
      // An http URI always has an authority, so an empty Host is as malformed as `a b` (RFC 9112 3.2).
      if (host !== undefined && !HOST_RE.test(host.trim()))
        return send(res, 400, { error: 'malformed Host header' });
      const url = targetOf(req.url ?? '/');
      if (!url) return send(res, 400, { error: 'malformed request target' });
      if (req.method === 'GET' && url.pathname === '/healthz') return send(res, 200, { status: 'ok' });
      if (req.method === 'GET' && url.pathname === '/openapi.json') {
        openApi ??= warmUp().then(async () => (await import('../openapi.js')).buildOpenApi());
        return send(res, 200, await openApi);
      }
      // Only for `/` as sent: a target like `/run/%2e%2e` also normalizes to `/`, and must stay a 404.
      if (req.method === 'GET' && /^\/(\?.*)?$/.test(req.url ?? '')) {
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'cache-control': 'no-store',
          'content-security-policy':
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self'",
        });
        return res.end(dashboardHtml({ credentialsPath, dataDir }));
      }
      // Test-run media and reports, at signed expiring URLs (no credentials): lib/local/media-routes.ts.
      if (await serveSigned(req, res, url)) return;
      if (serveTraceViewer(req, res, url)) return;
      const body = await readBody(req);
      if (body === 'aborted') return res.destroy();
      if (body === 'too-large') return send(res, 413, { error: 'request body too large' });
      const match = matchRoute(compiled, req.method ?? 'GET', url.pathname);
      if (!match) return send(res, 404, { error: 'route not found' });
      const event = toProxyEvent(req, url, match.route, match.params, body);
      const requestId = event.requestContext.requestId;
      const handler = await handlerOf(match.route.id);
      const result = await handler(event, lambdaContext(match.route.id, requestId));
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      for (const k in result.headers)
        if (Object.hasOwn(result.headers, k) && k !== '__proto__') headers[k] = String(result.headers[k]);
      headers['x-request-id'] = requestId;
      res.writeHead(result.statusCode, headers);
      res.end(result.body ?? '');
    } catch (err) {
      log.error('local server error', { name: (err as Error).name });
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
      else res.end();
    }
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return socket.destroy();
    const [status, reason, error] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'request headers too large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'request timeout']
          : [400, 'Bad Request', 'malformed HTTP request'];
    socket.end(socketError(status, reason, error));
  });
  server.on('checkExpectation', (_req, res) => send(res, 417, { error: 'unsupported Expect header' }));
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(opts.port ?? 3000, opts.host ?? '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  lock.setPort(port);
  // A handler that fails to load answers 500 on its route (and says why here), as a broken Lambda would.
  // Then the state machines are built (their library loads only now when every definition was known
  // valid), one import after the other as above.
  const warmed = warmUp()
    .catch((err: Error) =>
      log.error('a route handler failed to load', { name: err.name, detail: err.message.slice(0, 300) }),
    )
    .then(() => adapters.workflows.warm())
    .catch((err: Error) =>
      log.error('a state machine failed to load', { name: err.name, detail: err.message.slice(0, 300) }),
    );
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;
  // The merge gate's links (details, reports, screenshots) point here unless PUBLIC_URL says otherwise.
  defaultPublicUrl(url);
  writeFileSync(
    serverInfoPath(dataDir),
    JSON.stringify({
      pid: process.pid,
      url,
      dynamodbEndpoint: dynamo.endpoint,
      // Where `previewctl envs deploy` finds a branch's head locally.
      gitRoot,
    }),
    { mode: 0o600 },
  );

  let stopped = false;
  return {
    url,
    port,
    dataDir,
    credentials,
    credentialsPath,
    gitRoot,
    workflows: adapters.workflows,
    runtime: adapters.runtime(),
    recovered,
    bus: adapters.bus,
    inbox,
    expiry,
    webhookSecret,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      // No module import outlives the server (a test's environment may be torn down right after).
      await warmed;
      await new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      });
      await expiry.stop();
      await inbox.stop();
      await adapters.stop();
      await dynamo.stop();
      rmSync(serverInfoPath(dataDir), { force: true });
      lock.release();
    },
  };
}

/**
 * The start banner's lines about previews that follow the pull request (bin/start.ts prints them): where
 * GitHub (or a test) sends webhooks, where their secret is, how to put an event on the local bus.
 */
export function webhookStartupLines(
  service: Pick<LocalService, 'url' | 'webhookSecret' | 'expiry'>,
): string[] {
  const secret =
    service.webhookSecret.from === 'env'
      ? 'PREVIEW_GITHUB_WEBHOOK_SECRET'
      : `${service.webhookSecret.path} (mode 0600${service.webhookSecret.created ? ', generated now' : ''})`;
  return [
    `  webhooks:    POST ${service.url}/v1/github/webhooks (GitHub App webhook; secret: ${secret})`,
    `  events:      previewctl events put --file EVENT.json (the local event bus); expiry sweep every ${service.expiry.everySeconds} s`,
  ];
}

/**
 * The start banner's closing lines (bin/start.ts prints them): where the dashboard is and the first
 * commands to run, for someone who just typed `npm start`.
 */
export function nextStepLines(service: Pick<LocalService, 'url' | 'gitRoot' | 'credentialsPath'>): string[] {
  return [
    `  dashboard:   ${service.url}/ (the API key is in ${service.credentialsPath})`,
    `  next:        a git repository at ${service.gitRoot}/OWNER/REPO with a preview.yaml, then`,
    '               npx previewctl apps create --repo OWNER/REPO',
    '               npx previewctl envs deploy --repo OWNER/REPO --pr 1 --wait',
    '               (npx previewctl --help lists every command; the README walks through it)',
  ];
}
