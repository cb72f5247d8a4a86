import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { keys } from '../../../manifest/tables.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { DeployFailed } from '../../../shared/step-errors.js';
import type { AppLaunch, RuntimeTarget, ServiceLaunch, ServiceState } from '../port.js';
import { drainedOrLater, openLog } from './logs.js';
import {
  ensureTemplate,
  PG_DATABASE,
  PG_USER,
  pgReady,
  serverArgs,
  servingMajor,
  setPassword,
  type Wrap,
} from './postgres.js';
import { copyCluster, copyFromServer, refillSpare, takeSpare } from './postgres-copy.js';
import { freePort } from './readiness.js';
import { bubblewrapUsable, serviceSandboxArgs } from './sandbox.js';
import {
  type EnvState,
  envId,
  type LocalRuntime,
  netnsPath,
  POLL_MS,
  type ServiceRecord,
  sleep,
} from './state.js';
import { exitOf, killGroup, killOrphan, OWNER_VAR, spawnCommand } from './supervision.js';

/*
 * The services of a local preview (preview.yaml `services:`): one server per service per environment,
 * Debian's Postgres or redis-server, in the environment's network namespace (its apps reach it on
 * 127.0.0.1) and in a sandbox of its own that sees only its directory and runs as an unprivileged user
 * (SERVICE_UID; Postgres refuses root). Its data lives under `<dataDir>/runtime/services/<env>/<name>/`,
 * kept across redeploys, restarts of the server and sleep, removed at teardown. Seed runs once when a
 * service is created empty; each app's `migrate` before its new commit starts.
 *
 * Its Unix socket (Postgres's `.s.PGSQL.<port>`, Redis's `redis.sock`) does not live there: a socket's
 * path has at most 107 bytes, which a long data dir or long owner and repository names pass. It lives in
 * a socket directory of its own named by a hash of the service's identity (`socketDir`), under
 * `<dataDir>/runtime/sock/` when that fits, else under `/tmp/preview-sock-<uid>/`; made 0700 (and its
 * parent checked to be this server's own, 0700, no link), bound into the service's sandbox, removed with
 * the service.
 */

const READY_TIMEOUT_MS = 30_000;
/** How often a starting server is asked (a deploy waits on it: a Postgres starts in some 50 ms). */
const READY_POLL_MS = 10;
const STOP_GRACE_MS = 10_000;
/** How long a seed or migrate may run. */
const ONCE_TIMEOUT_MS = 10 * 60_000;

export const servicesRoot = (rt: LocalRuntime) => join(rt.root, 'services');
const serviceDir = (rt: LocalRuntime, id: string, name: string) =>
  join(servicesRoot(rt), ...id.split('/'), name);

/** The longest path a Unix socket may have (`sun_path`: 108 bytes, its NUL included). */
export const SOCKET_PATH_MAX = 107;
/** The longest name a service's socket has in its directory (Postgres's, at the highest port). */
const LONGEST_SOCKET_NAME = '.s.PGSQL.65535';
export const REDIS_SOCKET = 'redis.sock';

/**
 * The socket directory of service `name` of environment `id` (runtime root `root`): a hash of the three,
 * under the root when the longest socket fits there, else under a short directory of /tmp.
 */
export function socketDir(root: string, id: string, name: string): string {
  const hash = createHash('sha256').update(`${root}\0${id}\0${name}`).digest('hex').slice(0, 16);
  const inRoot = join(root, 'sock', hash);
  if (Buffer.byteLength(join(inRoot, LONGEST_SOCKET_NAME)) <= SOCKET_PATH_MAX) return inRoot;
  return join('/tmp', `preview-sock-${process.getuid?.() ?? 'user'}`, hash);
}

/**
 * Make a socket directory (0700), its parent first: that one (in /tmp, shared with every user) must be
 * a directory of this server's user, 0700, not a link, or the service is refused.
 */
export function makeSocketDir(dir: string): void {
  const parent = dirname(dir);
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  const st = lstatSync(parent);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0)
    throw new DeployFailed(
      `the services' socket directory ${parent} is not this server's own (a directory of its user, mode 0700): remove it`,
    );
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

const pidAlive = (pid: number | undefined) => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** How a service's command runs here: in its sandbox (as SERVICE_UID) and its environment's namespace. */
function wrapFor(rt: LocalRuntime, id: string, sockDir?: string): Wrap {
  return (dir, argv) => {
    const enter = rt.network === 'namespace' ? ['nsenter', `--net=${netnsPath(rt, id)}`, '--'] : [];
    if (bubblewrapUsable()) {
      const all = [...enter, 'bwrap', ...serviceSandboxArgs(dir, argv, sockDir ? [sockDir] : [])];
      return { command: all[0]!, args: all.slice(1) };
    }
    if (process.getuid?.() === 0)
      throw new DeployFailed(
        'services need bubblewrap here: the server runs as root and a database refuses root (apt-get install bubblewrap)',
      );
    const all = [...enter, ...argv];
    return { command: all[0]!, args: all.slice(1) };
  };
}

/** The connection URL an app's env gets for a service. */
function urlOf(rec: ServiceRecord, launch: ServiceLaunch): string {
  const password = encodeURIComponent(launch.password);
  return rec.kind === 'postgres'
    ? `postgres://${PG_USER}:${password}@127.0.0.1:${rec.port}/${PG_DATABASE}`
    : `redis://default:${password}@127.0.0.1:${rec.port}/0`;
}

/**
 * Make sure each of `services` exists and runs (creating it on first use: empty, or copied from the main
 * branch's environment) and remove those no longer declared. Returns their URLs and the ones created
 * empty and not seeded yet (a seed that failed runs again with the next deploy). Called under the environment's lock.
 */
export async function ensureServices(
  rt: LocalRuntime,
  target: RuntimeTarget,
  env: EnvState,
  services: ServiceLaunch[],
  say: (line: string) => void,
): Promise<{ urls: Record<string, string>; unseeded: string[] }> {
  const id = envId(target);
  env.services ??= {};
  for (const [name, rec] of Object.entries(env.services))
    if (!services.some((s) => s.name === name && s.spec.kind === rec.kind)) {
      await stopService(rec);
      rmSync(serviceDir(rt, id, name), { recursive: true, force: true });
      rmSync(socketDir(rt.root, id, name), { recursive: true, force: true });
      delete env.services[name];
    }
  const urls: Record<string, string> = {};
  for (const launch of services) {
    const dir = serviceDir(rt, id, launch.name);
    let rec = env.services[launch.name];
    if (!rec || !existsSync(dir)) {
      rec = await createService(rt, target, launch, dir, say);
      env.services[launch.name] = rec;
    }
    if (!pidAlive(rec.pid)) await startService(rt, id, launch.name, rec);
    urls[launch.name] = urlOf(rec, launch);
  }
  const unseeded = services.filter((s) => !env.services![s.name]!.copied && !env.services![s.name]!.seeded);
  return { urls, unseeded: unseeded.map((s) => s.name) };
}

async function createService(
  rt: LocalRuntime,
  target: RuntimeTarget,
  launch: ServiceLaunch,
  dir: string,
  say: (line: string) => void,
): Promise<ServiceRecord> {
  const id = envId(target);
  const wrap = wrapFor(rt, id);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const sockDir = socketDir(rt.root, id, launch.name);
  rmSync(sockDir, { recursive: true, force: true });
  const port = await freePort();
  const createdAt = new Date().toISOString();
  if (launch.spec.kind === 'redis') {
    writeRedisConf(dir, port, launch.password, sockDir);
    return { kind: 'redis', major: '7', port, createdAt };
  }
  const major = servingMajor(launch.spec.version);
  if (!major)
    throw new DeployFailed(
      `service ${launch.name}: postgres is not installed here (apt-get install postgresql)`,
    );
  if (major !== launch.spec.version)
    say(`service ${launch.name}: postgres ${launch.spec.version} declared, postgres ${major} serves it here`);
  const main =
    launch.spec.from === 'main' && target.prNumber !== 0 ? mainService(rt, target, launch.name) : null;
  try {
    if (main === undefined)
      throw new DeployFailed(
        `service ${launch.name}: from: main, but the main branch's environment runs no postgres service ${launch.name}: deploy the main branch first`,
      );
    const template = ensureTemplate(wrap, join(servicesRoot(rt), 'templates'), major);
    const spare = takeSpare(template, join(dir, 'cluster'));
    if (main) {
      await copyFromServer(main.rec.major, main.sock, main.rec.port, main.data, dir);
      say(`service ${launch.name}: copied from the main branch's (a file-level copy of its running server)`);
    } else if (!spare) await copyCluster(join(template, 'cluster'), join(dir, 'cluster'));
    setPassword(wrap, dir, major, launch.password);
    refillSpare(template);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    if (err instanceof DeployFailed) throw err;
    throw new DeployFailed(
      `service ${launch.name}: could not create it: ${maskSecrets((err as Error).message, [launch.password])}`,
    );
  }
  return { kind: 'postgres', major, port, createdAt, ...(main ? { copied: true } : {}) };
}

/** The main branch's running postgres of the same name (undefined: none; null: not asked). */
function mainService(rt: LocalRuntime, target: RuntimeTarget, name: string) {
  const mainId = envId({ orgId: target.orgId, envKey: keys.environments.envKey(target.repoFullName, 0) });
  const rec = rt.state.envs[mainId]?.services?.[name];
  if (rec?.kind !== 'postgres' || !pidAlive(rec.pid)) return undefined;
  return { rec, sock: socketDir(rt.root, mainId, name), data: join(serviceDir(rt, mainId, name), 'cluster') };
}

function writeRedisConf(dir: string, port: number, password: string, sockDir: string) {
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const conf = [
    'bind 127.0.0.1',
    `port ${port}`,
    `unixsocket ${join(sockDir, REDIS_SOCKET)}`,
    'unixsocketperm 700',
    `dir ${join(dir, 'data')}`,
    'appendonly yes',
    'appendfsync no',
    'save ""',
    'daemonize no',
    `requirepass ${password}`,
  ];
  writeFileSync(join(dir, 'redis.conf'), `${conf.join('\n')}\n`, { mode: 0o600 });
}

/** Start a service's server and wait until it accepts connections. */
async function startService(rt: LocalRuntime, id: string, name: string, rec: ServiceRecord) {
  const dir = serviceDir(rt, id, name);
  const sockDir = socketDir(rt.root, id, name);
  // Made again on every start: a /tmp one does not outlive a reboot.
  makeSocketDir(sockDir);
  const argv =
    rec.kind === 'postgres'
      ? serverArgs(dir, sockDir, rec.major, rec.port)
      : ['/usr/bin/redis-server', join(dir, 'redis.conf')];
  const { command, args } = wrapFor(rt, id, sockDir)(dir, argv);
  const out = openSync(join(dir, 'server.log'), 'a', 0o600);
  const child = spawn(command, args, {
    detached: true,
    stdio: ['ignore', out, out],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', [OWNER_VAR]: `${id}/service:${name}` },
  });
  closeSync(out);
  if (child.pid === undefined) throw new DeployFailed(`service ${name}: could not start its server`);
  child.unref();
  rec.pid = child.pid;
  const exited = exitOf(child).then((how) => how);
  let how: string | undefined;
  void exited.then((h) => {
    how = h;
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (how) throw new DeployFailed(`service ${name}: its server exited (${how}) while starting`);
    const ready = rec.kind === 'postgres' ? pgReady(rec.major, sockDir, rec.port) : await redisReady(sockDir);
    if (ready) return;
    if (Date.now() > deadline) {
      killGroup(rec.pid, 'SIGKILL');
      throw new DeployFailed(`service ${name}: its server did not accept connections in time`);
    }
    await sleep(READY_POLL_MS);
  }
}

/** Whether redis answers on its socket (any answer: without the password it says NOAUTH). */
function redisReady(sockDir: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(join(sockDir, REDIS_SOCKET));
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', () => done(true));
    socket.setTimeout(1_000, () => done(false));
  });
}

/** Start every recorded service of an environment that is not running (a wake, after a stop). */
export async function startServices(rt: LocalRuntime, id: string, env: EnvState): Promise<void> {
  for (const [name, rec] of Object.entries(env.services ?? {}))
    if (!pidAlive(rec.pid)) await startService(rt, id, name, rec);
}

/** Stop a service's server (Postgres: a fast shutdown), waiting for it; its data stays. */
export async function stopService(rec: ServiceRecord): Promise<void> {
  const pid = rec.pid;
  delete rec.pid;
  if (!pidAlive(pid)) return;
  killGroup(pid, rec.kind === 'postgres' ? 'SIGINT' : 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (pidAlive(pid) && Date.now() < deadline) await sleep(POLL_MS);
  killGroup(pid, 'SIGKILL');
}

/** Stop every service of an environment (its data stays). */
export async function stopServices(env: EnvState): Promise<void> {
  for (const rec of Object.values(env.services ?? {})) await stopService(rec);
}

/** Stop and remove every service of an environment with all it stored. */
export async function dropServices(rt: LocalRuntime, id: string, env: EnvState): Promise<void> {
  await stopServices(env);
  for (const name of Object.keys(env.services ?? {}))
    rmSync(socketDir(rt.root, id, name), { recursive: true, force: true });
  delete env.services;
  rmSync(join(servicesRoot(rt), ...id.split('/')), { recursive: true, force: true });
}

/** The services' states as the status answer shows them. */
export function serviceStates(env: EnvState | undefined): Record<string, ServiceState> {
  const out: Record<string, ServiceState> = {};
  for (const [name, rec] of Object.entries(env?.services ?? {}))
    out[name] = { kind: rec.kind, status: pidAlive(rec.pid) ? 'ready' : 'stopped' };
  return out;
}

/**
 * Run a seed or a migrate command of `launch`'s app in its working copy (its sandbox, its namespace),
 * with the app's variables, its output appended to the app's log. A failure is a DeployFailed naming the
 * command, how it ended and the end of its output, secret values and passwords masked.
 */
export async function runOnce(
  rt: LocalRuntime,
  target: RuntimeTarget,
  env: EnvState,
  launch: AppLaunch,
  what: 'seed' | 'migrate',
  command: string,
): Promise<void> {
  const id = envId(target);
  const build = env.apps[launch.name]?.build;
  if (!build) throw new DeployFailed(`app ${launch.name} has no build to run ${what} from; rebuild it`);
  const secrets = [...launch.secretKeys.map((k) => launch.vars[k]!), ...(launch.masked ?? [])].filter(
    (v) => v.length > 0,
  );
  const fd = openLog(rt, target, launch.name, `${what} ${build.sha.slice(0, 12)}`);
  const logFile = join(rt.root, ...id.split('/'), 'logs', `${launch.name}.log`);
  const from = statSync(logFile).size;
  const { child, drained } = spawnCommand(
    rt,
    command,
    build.dir,
    fd,
    { build: true },
    { ...launch.vars, [OWNER_VAR]: `${id}/${launch.name}` },
    secrets,
    rt.network === 'namespace' ? netnsPath(rt, id) : undefined,
  );
  const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), ONCE_TIMEOUT_MS);
  const how = await exitOf(child);
  clearTimeout(timer);
  killGroup(child.pid, 'SIGKILL');
  await drainedOrLater(drained);
  if (how === 'exit code 0') return;
  const tail = maskSecrets(readFrom(logFile, from), secrets)
    .split('\n')
    .filter((l) => l.trim())
    .slice(-10)
    .join('\n');
  throw new DeployFailed(
    `app ${launch.name}: ${what} \`${command}\` failed (${how}); its output ends:\n${tail || '(no output)'}`,
  );
}

function readFrom(path: string, from: number): string {
  const size = statSync(path).size;
  const start = Math.max(from, size - 8_192);
  const buf = Buffer.alloc(size - start);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, buf.length, start);
  } finally {
    closeSync(fd);
  }
  return buf.toString('utf8');
}

/** Kill the servers a crash left running (recorded as ours); their data stays. Returns how many. */
export function killOrphanServices(id: string, env: EnvState): number {
  let killed = 0;
  for (const rec of Object.values(env.services ?? {})) {
    if (rec.pid !== undefined && killOrphan(rec.pid, id)) killed++;
    delete rec.pid;
  }
  return killed;
}

/** Whether Debian's postgres and redis-server are installed (what `npm start` says when not). */
export function serviceEnginesMissing(): string[] {
  const missing: string[] = [];
  if (!servingMajor('15')) missing.push('postgresql');
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0)
    missing.push('redis-server');
  return missing;
}
