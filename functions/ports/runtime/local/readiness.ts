import { rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { DeployFailed } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { failureMessage } from '../log-cause.js';
import type { AppSpec, RuntimeTarget } from '../port.js';
import { logEnd, logTail } from './logs.js';
import { listeningInside } from './network.js';
import { type EnvState, envId, failure, type LocalRuntime, netnsPath, POLL_MS, sleep } from './state.js';
import { limitFailure, stopApp } from './supervision.js';
import { scrub, workDir } from './working-copies.js';

/*
 * Ports and readiness: each app's port (the one it had, so its URL stays the same), and the wait until
 * every app answers its health path (or accepts connections), heartbeating the task meanwhile.
 */

/** How often a readiness wait heartbeats its task (well under the DeployApps state's HeartbeatSeconds). */
const HEARTBEAT_MS = 60_000;
/** Readiness waits until an app's output has been quiet this long (at most `OUTPUT_SETTLE_MAX_MS`). */
const OUTPUT_QUIET_MS = 100;
const OUTPUT_SETTLE_MAX_MS = 2_000;

/**
 * Stop the app (if running) and choose its port: the one it had if it is free again, else a free one no
 * other app of this deploy took.
 */
export async function pickPort(
  rt: LocalRuntime,
  target: RuntimeTarget,
  env: EnvState,
  name: string,
  taken: Map<string, number>,
): Promise<number> {
  const app = env.apps[name]!;
  const previousBuild = app.running?.buildId;
  await stopApp(rt, app);
  if (previousBuild && previousBuild !== app.build!.buildId) {
    const old = join(workDir(rt, target), `${name}-${previousBuild}`);
    rmSync(old, { recursive: true, force: true });
  }
  const others = new Set([
    ...taken.values(),
    ...Object.entries(env.apps).flatMap(([n, a]) => (n !== name && a.port ? [a.port] : [])),
  ]);
  const range = rt.opts.appPorts;
  const previous = others.has(app.port ?? 0) || !inRange(app.port, range) ? undefined : app.port;
  let port: number;
  if (range) port = await freePortIn(range, others, previous);
  else {
    port = await freePort(previous);
    for (let attempt = 0; others.has(port) && attempt < 20; attempt++) port = await freePort();
  }
  app.port = port;
  return port;
}

const inRange = (port: number | undefined, range: { first: number; last: number } | undefined) =>
  port !== undefined && (!range || (port >= range.first && port <= range.last));

/**
 * A free port of PREVIEW_APP_PORTS: `preferred` if it is free (again), else the first free one from a
 * random place in the range, none of `taken`. None free: a DeployFailed that names the range.
 */
export async function freePortIn(
  range: { first: number; last: number },
  taken: Set<number>,
  preferred: number | undefined,
): Promise<number> {
  if (preferred !== undefined) {
    const port = await freePort(preferred, true);
    if (port) return port;
  }
  const size = range.last - range.first + 1;
  const offset = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i++) {
    const candidate = range.first + ((offset + i) % size);
    if (taken.has(candidate)) continue;
    if (await tryListen(candidate)) return candidate;
  }
  throw new DeployFailed(
    `no free port in PREVIEW_APP_PORTS=${range.first}-${range.last} (${size} port${size === 1 ? '' : 's'}, all in use): ` +
      'widen the range or tear down environments',
  );
}

/** Until every app of `apps` is ready (its URLs), one has failed or the time is up; heartbeats `token`. */
export async function waitForApps(
  rt: LocalRuntime,
  target: RuntimeTarget,
  apps: Record<string, AppSpec>,
  token: string,
): Promise<TaskOutcome> {
  const id = envId(target);
  const deadline = Date.now() + rt.opts.readyTimeoutMs;
  // DeployApps has HeartbeatSeconds: a readiness wait longer than that must say it is alive.
  let beatAt = Date.now() + HEARTBEAT_MS;
  const pending = new Set(Object.keys(apps));
  const lastSeen = new Map<string, string>();
  while (pending.size > 0) {
    if (Date.now() >= beatAt) {
      beatAt = Date.now() + HEARTBEAT_MS;
      await rt.opts.heartbeat?.(token);
    }
    const env = rt.state.envs[id];
    if (rt.stopping || !env || target.generation < env.fence)
      return failure('Superseded', 'a newer request or a teardown replaced this one');
    for (const name of [...pending]) {
      const running = env.apps[name]?.running;
      if (!running) return failure('DeployFailed', `app ${name} is not running`);
      const exit = rt.exits.get(running.pid);
      if (exit) {
        const end = logEnd(rt, target, name, 'app');
        const limit = limitFailure(rt, `app ${name}`, rt.hits.get(running.pid), exit, end);
        return failure(
          'DeployFailed',
          scrub(
            rt,
            failureMessage(
              limit
                ? `${limit} and exited (${exit}) before it was ready`
                : `app ${name} exited (${exit}) before it was ready`,
              // A limit hit is the cause: no line of the output is put before it.
              limit ? '' : end,
              logTail(rt, target, name, 'app'),
              { target, app: name, source: 'app' },
            ),
          ),
        );
      }
      // Through pasta the host's side of the port accepts before the app listens: ask the namespace.
      const probe =
        rt.network === 'namespace' && !listeningInside(running.pid, running.port, netnsPath(rt, id))
          ? `port ${running.port} is not listened on yet`
          : await probeReady(running.port, apps[name]!.health);
      if (probe === true) pending.delete(name);
      else lastSeen.set(name, probe);
    }
    if (pending.size === 0) break;
    if (Date.now() > deadline) {
      const name = [...pending][0]!;
      const seconds = Math.round(rt.opts.readyTimeoutMs / 1000);
      return failure(
        'DeployFailed',
        `app ${name} did not become ready within ${seconds} s: ${lastSeen.get(name) ?? 'no answer'}`,
      );
    }
    await sleep(POLL_MS);
  }
  const env = rt.state.envs[id]!;
  // What an app printed before it was ready is in its log once it is reported ready: its output passes
  // through a pipe (masked as written), and may still be arriving while it already listens.
  const settleUntil = Date.now() + OUTPUT_SETTLE_MAX_MS;
  for (const name of Object.keys(apps)) {
    const pid = env.apps[name]?.running?.pid;
    const last = pid === undefined ? undefined : rt.lastOutput.get(pid);
    while (last && Date.now() - last() < OUTPUT_QUIET_MS && Date.now() < settleUntil) await sleep(20);
  }
  const urls: Record<string, string> = {};
  for (const [name, app] of Object.entries(env.apps))
    if (app.running) urls[name] = app.door?.url ?? `http://127.0.0.1:${app.running.port}`;
  return { ok: true, output: { urls } };
}

/** The port if something can listen on it on 127.0.0.1 now (`0`: one the system picks); else undefined. */
const tryListen = (port: number) =>
  new Promise<number | undefined>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });

/**
 * A port free on 127.0.0.1, preferring `preferred` (so an app keeps its URL across restarts). With
 * `onlyPreferred`, undefined when that one stays busy.
 */
export async function freePort(preferred: number, onlyPreferred: true): Promise<number | undefined>;
export async function freePort(preferred?: number): Promise<number>;
export async function freePort(preferred?: number, onlyPreferred = false): Promise<number | undefined> {
  if (preferred) {
    // The process just stopped may take a moment to release it.
    for (let attempt = 0; attempt < 20; attempt++) {
      const port = await tryListen(preferred);
      if (port) return port;
      await sleep(50);
    }
  }
  if (onlyPreferred) return undefined;
  const port = await tryListen(0);
  if (!port) throw new DeployFailed('no free port on 127.0.0.1');
  return port;
}

/** true when ready; otherwise what the check saw (for the error message). */
export async function probeReady(port: number, health: string | undefined): Promise<true | string> {
  if (!health) {
    return new Promise((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' });
      const done = (result: true | string) => {
        socket.destroy();
        resolve(result);
      };
      socket.setTimeout(1_000, () => done(`port ${port} did not accept a connection`));
      socket.once('connect', () => done(true));
      socket.once('error', () => done(`port ${port} refused connections`));
    });
  }
  try {
    // A redirect is not followed (run confinement): the service would fetch whatever it names.
    const res = await fetch(`http://127.0.0.1:${port}${health}`, {
      redirect: 'manual',
      signal: AbortSignal.timeout(2_000),
    });
    await res.arrayBuffer();
    if (res.status >= 300 && res.status < 400) {
      const location = res.headers.get('location');
      return (
        `GET ${health} answered ${res.status}, a redirect${location ? ` to ${location.slice(0, 300)}` : ''}: ` +
        'not followed, the health path must answer 2xx itself'
      );
    }
    return res.ok ? true : `GET ${health} answered ${res.status}`;
  } catch {
    return `GET ${health} got no answer on port ${port}`;
  }
}
