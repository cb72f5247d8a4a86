import { createHash } from 'node:crypto';
import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import {
  ACCESS_COOKIE,
  ACCESS_PATH,
  accessSetCookie,
  checkAccessToken,
  cookieValue,
} from '../../../shared/access-token.js';
import { escapeHtml } from '../../../shared/html.js';
import { log } from '../../../shared/log.js';
import type { FrontDoorSettings, RuntimeTarget } from '../port.js';

/*
 * The local runtime's front door: a small HTTP proxy in this process in front of each app of an
 * environment whose application protects its previews or lets them sleep. It
 * - serves a protected app on a host name of its own under `localhost` (`web--acme-shop-7-1a2b.localhost`:
 *   Chromium and curl resolve `*.localhost` to the loopback), so its host-only access cookie is sent to
 *   no other preview (cookies ignore ports); a visitor without a valid cookie gets 401 and a page saying
 *   how to get in; `ACCESS_PATH?token=` sets the cookie (shared/access-token.ts);
 * - counts requests: an environment that served none for its `sleepAfterMs` is put to sleep (its processes
 *   stopped, by the runtime's `sleep` hook); the next request wakes it (`wake`) and is held until the apps
 *   answer, a browser's page load seeing a waiting page that reloads itself if that takes over a second.
 * The apps' own addresses (`internalUrl`, readiness probes, the service's calls) bypass it.
 *
 * What it decides (access, the waiting page, wake and sleep) is its own; the forwarding itself, of requests
 * and of WebSocket upgrades, is http-proxy-3's (hop-by-hop headers, a visitor who leaves mid-response: the
 * request to the app is destroyed, so a never-ending response such as server-sent events does not keep the
 * app's connection open, nor the request counted in flight and the preview awake).
 */

/** What the door needs of the runtime. */
export interface DoorHooks {
  /** The application's access key, or undefined when it has none. */
  accessKey(applicationId: string): Promise<string | undefined>;
  /** Stop the environment's apps (it served nothing for its idle time). */
  sleep(envId: string): Promise<void>;
  /** Start the environment's apps again and resolve once they answer. */
  wake(envId: string): Promise<void>;
  /** Whether the environment's apps are asleep. */
  asleep(envId: string): boolean;
  /**
   * A port for a new door: under PREVIEW_APP_PORTS, a free one of the range (the door is what visitors
   * reach, so it stays inside it too; none free: a DeployFailed naming the range). Absent: any free port.
   */
  pickPort?(previous?: number): Promise<number>;
}

/** One environment's doors. */
interface EnvDoor {
  target: Pick<RuntimeTarget, 'orgId' | 'envKey' | 'repoFullName' | 'prNumber'>;
  settings: FrontDoorSettings;
  /** app → its door and the port of the app's process behind it. */
  apps: Map<string, { server: Server; port: number; host?: string; upstream: number }>;
  lastRequestAt: number;
  inflight: number;
  waking?: Promise<void>;
}

/** How long a page load is held before it sees the waiting page instead. */
const HOLD_FOR_PAGE_MS = 1_000;
/** How long an access key read is trusted (a rotation takes effect within it). */
const KEY_CACHE_MS = 1_000;

/** The host name a protected app is served on: `<app>--<owner>-<repo>-<pr>-<tag>.localhost`. */
export function doorHostName(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): string {
  const [repo, pr] = target.envKey.split('#');
  const slug = `${app}--${(repo ?? '').replace('/', '-')}-${pr}`.toLowerCase().replace(/[^a-z0-9-]+/g, '-');
  // Two organizations may preview the same repository and PR: a short tag of the org tells them apart.
  const tag = createHash('sha256').update(`${target.orgId}\n${target.envKey}`).digest('hex').slice(0, 4);
  return `${slug.slice(0, 57)}-${tag}.localhost`;
}

export class FrontDoors {
  private readonly envs = new Map<string, EnvDoor>();
  private readonly keys = new Map<string, { key: string | undefined; at: number }>();
  private readonly timer: NodeJS.Timeout;
  /** Connections to the apps, kept alive between requests (a visitor's own keep-alive is not broken). */
  private readonly agent = new Agent({ keepAlive: true });
  private readonly proxy = createProxyServer({ ws: true, agent: this.agent });

  constructor(private readonly hooks: DoorHooks) {
    this.timer = setInterval(() => void this.sweep(), 250);
    this.timer.unref();
    // Every call passes its own error callback; this only keeps an unexpected one from ending the process.
    this.proxy.on('error', (err) => log.warn('the front door could not forward', { error: err.message }));
  }

  /**
   * Put (or keep) a door before `app` of environment `id`, whose process listens on `upstream`; `port` is
   * the door's port to reuse (the one it had). Returns the app's public URL.
   */
  async open(
    id: string,
    target: EnvDoor['target'],
    settings: FrontDoorSettings,
    app: string,
    upstream: number,
    port?: number,
  ): Promise<{ url: string; port: number }> {
    let door = this.envs.get(id);
    if (!door) {
      door = { target, settings, apps: new Map(), lastRequestAt: Date.now(), inflight: 0 };
      this.envs.set(id, door);
    }
    door.settings = settings;
    door.target = target;
    door.lastRequestAt = Date.now();
    const host = settings.access === 'protected' ? doorHostName(target, app) : undefined;
    let entry = door.apps.get(app);
    if (entry) {
      entry.upstream = upstream;
      entry.host = host;
    } else {
      const server = createServer((req, res) => void this.handle(id, app, req, res));
      server.on('upgrade', (req, socket, head) => this.upgrade(id, app, req, socket, head));
      const bound = this.hooks.pickPort
        ? await listen(server, await this.hooks.pickPort(port))
        : await listen(server, port);
      entry = { server, port: bound, host, upstream };
      door.apps.set(app, entry);
    }
    return { url: `http://${host ?? '127.0.0.1'}:${entry.port}`, port: entry.port };
  }

  /** Close the doors of environment `id` (all, or only `apps`). */
  async close(id: string, apps?: string[]): Promise<void> {
    const door = this.envs.get(id);
    if (!door) return;
    for (const [name, entry] of [...door.apps]) {
      if (apps && !apps.includes(name)) continue;
      door.apps.delete(name);
      entry.server.closeAllConnections();
      await new Promise((r) => entry.server.close(r));
    }
    if (door.apps.size === 0) this.envs.delete(id);
  }

  async closeAll(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.envs.keys()].map((id) => this.close(id)));
    this.agent.destroy();
  }

  /** Count a request to the environment now (a run, a restart): its idle time starts again. */
  touch(id: string): void {
    const door = this.envs.get(id);
    if (door) door.lastRequestAt = Date.now();
  }

  /** Wake environment `id` if it sleeps (one wake at a time, shared by every request waiting on it). */
  wake(id: string): Promise<void> {
    const door = this.envs.get(id);
    if (!door || !this.hooks.asleep(id)) return Promise.resolve();
    door.waking ??= this.hooks.wake(id).finally(() => {
      door.waking = undefined;
      door.lastRequestAt = Date.now();
    });
    return door.waking;
  }

  /** Put to sleep every environment idle for longer than its `sleepAfterMs`. */
  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const [id, door] of this.envs) {
      const after = door.settings.sleepAfterMs;
      if (!after || door.inflight > 0 || door.waking || now - door.lastRequestAt < after) continue;
      if (this.hooks.asleep(id)) continue;
      door.lastRequestAt = now; // not asked again while it falls asleep
      await this.hooks
        .sleep(id)
        .catch((err: Error) =>
          log.warn('a preview could not be put to sleep', { env: id, error: err.message }),
        );
    }
  }

  private async key(applicationId: string | undefined): Promise<string | undefined> {
    if (!applicationId) return undefined;
    const cached = this.keys.get(applicationId);
    if (cached && Date.now() - cached.at < KEY_CACHE_MS) return cached.key;
    const key = await this.hooks.accessKey(applicationId);
    this.keys.set(applicationId, { key, at: Date.now() });
    return key;
  }

  /**
   * Whether the request may pass: `true`, or the answer already sent (a wrong host name, the link's
   * redirect, the 401 page).
   */
  private async admit(door: EnvDoor, app: string, req: IncomingMessage, res: ServerResponse) {
    const entry = door.apps.get(app)!;
    if (door.settings.access !== 'protected') return true;
    const url = new URL(req.url ?? '/', `http://${entry.host}`);
    const host = (req.headers.host ?? '').toLowerCase();
    if (host !== `${entry.host}:${entry.port}`) {
      // The app's cookie is host-only on its own name: any other name (127.0.0.1) is sent there first.
      res.writeHead(308, { location: `http://${entry.host}:${entry.port}${url.pathname}${url.search}` });
      res.end();
      return false;
    }
    const scope = { orgId: door.target.orgId, envKey: door.target.envKey };
    const key = await this.key(door.settings.applicationId);
    if (url.pathname === ACCESS_PATH) {
      const token = url.searchParams.get('token') ?? undefined;
      const check = checkAccessToken(key, scope, token, Date.now());
      if (check !== 'ok') return this.refuse(door, res, check === 'expired' ? 'expired' : 'invalid');
      res.writeHead(302, { location: '/', 'set-cookie': accessSetCookie(token!, Date.now(), false) });
      res.end();
      return false;
    }
    const check = checkAccessToken(key, scope, cookieValue(req.headers.cookie), Date.now());
    if (check === 'ok') return true;
    return this.refuse(
      door,
      res,
      check === 'missing' ? 'missing' : check === 'expired' ? 'expired' : 'invalid',
    );
  }

  private refuse(door: EnvDoor, res: ServerResponse, why: 'missing' | 'expired' | 'invalid'): false {
    const { repoFullName, prNumber } = door.target;
    const reason = {
      missing: 'This preview is protected.',
      expired: 'Your access link has expired.',
      invalid: 'Your access link or cookie is no longer valid (the access key may have been rotated).',
    }[why];
    const body = page(
      'Protected preview',
      `<p>${reason}</p><p>Get a link in: <code>previewctl envs open --repo ${escapeHtml(repoFullName)} --pr ${prNumber}</code>, the pull request's comment, or the dashboard. Opening it lets this browser in for 7 days.</p>`,
    );
    res.writeHead(401, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body);
    return false;
  }

  private async handle(id: string, app: string, req: IncomingMessage, res: ServerResponse) {
    const door = this.envs.get(id);
    const entry = door?.apps.get(app);
    if (!door || !entry) {
      res.writeHead(503).end();
      return;
    }
    door.inflight++;
    door.lastRequestAt = Date.now();
    try {
      if (!(await this.admit(door, app, req, res))) return;
      if (this.hooks.asleep(id) || door.waking) {
        const woken = this.wake(id);
        const pageLoad = req.method === 'GET' && (req.headers.accept ?? '').includes('text/html');
        if (pageLoad) {
          const first = await Promise.race([
            woken.then(() => true),
            delay(HOLD_FOR_PAGE_MS).then(() => false),
          ]);
          if (!first) {
            res.writeHead(503, {
              'content-type': 'text/html; charset=utf-8',
              'retry-after': '1',
              'cache-control': 'no-store',
            });
            res.end(waitingPage());
            return;
          }
        } else await woken;
      }
      await this.forward(req, res, entry.upstream);
    } catch (err) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`the preview did not answer: ${(err as Error).message}\n`);
    } finally {
      door.inflight--;
      door.lastRequestAt = Date.now();
    }
  }

  /**
   * WebSockets: the upgrade admitted like a request (a cookie check), the environment woken, then forwarded
   * by http-proxy-3 (which takes WebSocket upgrades only: another protocol's is refused). An open one counts
   * as a request in flight until the visitor's socket closes, so a preview with a live connection does not
   * fall asleep under it; when it closes, the library ends the connection to the app.
   */
  private upgrade(id: string, app: string, req: IncomingMessage, socket: Duplex, head: Buffer) {
    const door = this.envs.get(id);
    const entry = door?.apps.get(app);
    if (!door || !entry) return void socket.destroy();
    door.inflight++;
    door.lastRequestAt = Date.now();
    socket.once('close', () => {
      door.inflight--;
      door.lastRequestAt = Date.now();
    });
    void (async () => {
      if (door.settings.access === 'protected') {
        const key = await this.key(door.settings.applicationId);
        const ok = checkAccessToken(key, door.target, cookieValue(req.headers.cookie), Date.now()) === 'ok';
        if (!ok) return void socket.end('HTTP/1.1 401 Unauthorized\r\nconnection: close\r\n\r\n');
      }
      await this.wake(id);
      dropAccessCookie(req);
      this.proxy.ws(req, socket, head, { target: appTarget(entry.upstream) }, () => socket.destroy());
    })().catch(() => socket.destroy());
  }

  /**
   * Forward a request to the app on `port`; resolves when the visitor's response is over (sent whole, or
   * the visitor gone: the library then destroys the request to the app), rejects when the app cannot be
   * reached or fails mid-answer.
   */
  private forward(req: IncomingMessage, res: ServerResponse, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      res.once('close', () => resolve());
      dropAccessCookie(req);
      this.proxy.web(req, res, { target: appTarget(port) }, (err) => reject(err));
    });
  }
}

/** The app's own address (its process listens on the loopback). */
const appTarget = (port: number) => `http://127.0.0.1:${port}`;

/** Take the access cookie out of the request before it is forwarded: the app never sees it. */
function dropAccessCookie(req: IncomingMessage): void {
  const { cookie } = req.headers;
  if (typeof cookie !== 'string') return;
  const kept = cookie
    .split(';')
    .filter((c) => c.split('=')[0]?.trim() !== ACCESS_COOKIE)
    .join(';')
    .trim();
  if (kept) req.headers.cookie = kept;
  else delete req.headers.cookie;
}

function listen(server: Server, port?: number): Promise<number> {
  const attempt = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  return port ? attempt(port).catch(() => attempt(0)) : attempt(0);
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

function page(title: string, body: string, head = ''): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>${head}<style>body{font:16px system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em}code{background:#eee;padding:.1em .3em}</style></head><body><h1>${title}</h1>${body}</body></html>`;
}

const waitingPage = () =>
  page(
    'Waking the preview…',
    '<p>This preview was asleep after a while without visits; it is starting again. This page reloads by itself.</p>',
    '<meta http-equiv="refresh" content="1">',
  );
