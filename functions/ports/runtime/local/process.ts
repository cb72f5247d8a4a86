import { closeSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { log } from '../../../shared/log.js';
import { ensurePrivateDir } from '../../../shared/private-dir.js';
import { DeployFailed, Superseded } from '../../../shared/step-errors.js';
import { type AppAddress, resolveAppRefs, resolveServiceRefs } from '../app-refs.js';
import { leadingCause } from '../log-cause.js';
import type {
  AppLaunch,
  AppSpec,
  BuildOptions,
  DeployOptions,
  FrontDoor,
  LogQuery,
  LogTarget,
  LogText,
  Runtime,
  RuntimeTarget,
} from '../port.js';
import { REBUILT_DIR } from './build-cache.js';
import { cancel, cancelBuilds, runBuild } from './builds.js';
import { FrontDoors } from './front-door.js';
import { DEFAULT_LIMITS, DiskWatch, type SandboxLimits, sweepSandboxCgroups } from './limits.js';
import { buildLogPath, logEnd, logPath, openLog, readLogs } from './logs.js';
import { createNetns, listeningInside, removeNetns, startPasta, stopPasta } from './network.js';
import { freePortIn, pickPort, probeReady, waitForApps } from './readiness.js';
import type { Isolation } from './sandbox.js';
import {
  dropServices,
  ensureServices,
  killOrphanServices,
  runOnce,
  startServices,
  stopServices,
} from './services.js';
import {
  type ActiveBuild,
  type EnvState,
  envId,
  type LocalRuntime,
  loadState,
  locked,
  netnsPath,
  type ProcessRuntimeOptions,
  type RunningRecord,
  save,
} from './state.js';
import { killGroup, killOrphan, startApp, stopApp } from './supervision.js';
import { hiddenPathsOf, removeTree, removeUnowned, scrub, workDir } from './working-copies.js';

export type { ProcessRuntimeOptions } from './state.js';

/**
 * The local runtime: every app of a preview environment is a process on this machine. Per app, a working
 * copy of the head SHA (from the source host) where `build` runs and then `command`, with `PORT` set to a
 * free port and the app's env (preview.yaml env + its secret bundle). Readiness is the health path answering
 * 2xx (or the port accepting connections), the URL is `http://127.0.0.1:<port>`. The app's output goes to
 * `<dataDir>/runtime/<org>/<owner>/<repo>/<pr>/logs/<app>.log` (appended, a `--- … start … ---` header per
 * process, the last 5 kept), its builds' to `<app>.build.log` beside it (the latest; the two before it in
 * `<app>.build.1.log`, `<app>.build.2.log`; a marker line in the app's log says when one began); working
 * copies live under `workDir`.
 *
 * What runs is recorded in `<dataDir>/runtime/state.json`, so a restarted server can find what a crash left
 * behind (`recover`). Operations on one environment are serialized; builds run outside that lock and are
 * cancelled when a newer generation or a teardown arrives.
 *
 * This class composes the parts beside it, each given its state (`LocalRuntime`, state.ts): the builds
 * (builds.ts), process supervision (supervision.ts), ports and readiness (readiness.ts), logs (logs.ts) and
 * working copies (working-copies.ts).
 */
export class ProcessRuntime implements Runtime, FrontDoor {
  /** Its state and configuration, which its parts (builds.ts, supervision.ts, readiness.ts …) are given. */
  private readonly rt: LocalRuntime;
  /** The resource limits of each sandbox (fixed for the runtime's life). */
  readonly limits: SandboxLimits;
  /** Whether each environment has a network namespace of its own (fixed for the runtime's life). */
  readonly network: 'namespace' | 'shared';
  /** How builds and apps are confined (fixed for the runtime's life). */
  readonly isolation: Isolation;
  /** The front doors of protected or sleeping previews (front-door.ts). */
  private readonly doors: FrontDoors;
  /** Per environment: its target, and each app's launch as last started (what a wake starts again). */
  private readonly awake = new Map<string, { target: RuntimeTarget; launches: Map<string, AppLaunch> }>();

  constructor(opts: ProcessRuntimeOptions) {
    this.isolation = opts.isolation ?? 'none';
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    const overDisk = new Set<number>();
    const diskWatch = new DiskWatch(
      this.limits.diskMiB,
      (pid) => {
        overDisk.add(pid);
        killGroup(pid, 'SIGKILL');
      },
      opts.diskCheckMs,
    );
    this.network = this.isolation === 'bwrap' && opts.network === 'namespace' ? 'namespace' : 'shared';
    const root = join(opts.dataDir, 'runtime');
    mkdirSync(root, { recursive: true, mode: 0o700 });
    // Working copies hold apps' sources and builds: no other user may read them or plant anything there.
    ensurePrivateDir(opts.workDir, 'work dir');
    const hiddenPaths = hiddenPathsOf(opts);
    const statePath = join(root, 'state.json');
    this.rt = {
      opts,
      root,
      statePath,
      state: loadState(statePath),
      locks: new Map(),
      builds: new Map(),
      children: new Map(),
      exits: new Map(),
      secretValues: new Map(),
      cgroups: new Map(),
      hits: new Map(),
      lastOutput: new Map(),
      overDisk,
      diskWatch,
      limits: this.limits,
      network: this.network,
      stopping: false,
      isolation: this.isolation,
      hiddenPaths,
    };
    this.doors = new FrontDoors({
      accessKey: async (applicationId) => opts.accessKey?.(applicationId),
      asleep: (id) => Boolean(this.rt.state.envs[id]?.asleepAt),
      ...(opts.appPorts
        ? { pickPort: (previous?: number) => freePortIn(opts.appPorts!, new Set(), previous) }
        : {}),
      sleep: (id) => this.sleepEnv(id),
      wake: (id) => this.wakeEnv(id),
    });
  }

  // ---- the Runtime port ------------------------------------------------------------------------------

  async build(
    target: RuntimeTarget,
    sha: string,
    apps: Record<string, AppSpec>,
    token: string,
    opts: BuildOptions = {},
  ) {
    const rt = this.rt;
    const id = envId(target);
    const names = Object.keys(apps);
    for (const name of names) {
      if (!apps[name]!.command)
        throw new DeployFailed(`app ${name}: preview.yaml has no command; the local runtime needs one`);
    }
    const active: ActiveBuild = {
      generation: target.generation,
      cancelled: false,
      children: new Set(),
      abort: new AbortController(),
      checkouts: new Set(),
    };
    await locked(rt, id, async () => {
      const env = this.admit(target);
      // Builds run in the environment's namespace too (outbound through pasta, nothing of this machine).
      if (rt.network === 'namespace' && !env.net) this.connect(target, env, []);
      const current = rt.builds.get(id) ?? new Map<string, ActiveBuild>();
      for (const name of names) {
        const older = current.get(name);
        if (older) void cancel(older);
        current.set(name, active);
      }
      rt.builds.set(id, current);
    });
    void runBuild(rt, target, sha, apps, active, opts)
      .then((outcome) => rt.opts.complete(token, outcome))
      .catch((err: Error) => log.error('local build bookkeeping failed', { env: id, error: err.message }));
  }

  async deploy(target: RuntimeTarget, launches: AppLaunch[], opts: DeployOptions = {}) {
    const rt = this.rt;
    const id = envId(target);
    await locked(rt, id, async () => {
      const env = this.admit(target);
      for (const launch of launches) {
        const build = env.apps[launch.name]?.build;
        if (!build || !existsSync(build.dir))
          throw new DeployFailed(`app ${launch.name} has no build to start; rebuild it`);
      }
      if (opts.prune) {
        const keep = new Set(launches.map((l) => l.name));
        for (const [name, app] of Object.entries(env.apps)) {
          if (keep.has(name)) continue;
          await stopApp(rt, app);
          await this.doors.close(id, [name]);
          if (app.build) rmSync(app.build.dir, { recursive: true, force: true });
          delete env.apps[name];
        }
      }
      // Ports first (each app keeps the one it had), so sibling references resolve before anything starts;
      // a reference to an unknown app fails before anything is stopped.
      const declared = opts.apps ?? launches.map((l) => l.name);
      const placeholder = { url: '', internalUrl: '' };
      for (const l of launches) resolveAppRefs(l, Object.fromEntries(declared.map((n) => [n, placeholder])));
      // pasta holds the environment's ports on this machine: it goes first (so an app keeps its port),
      // and comes back forwarding the new set.
      if (rt.network === 'namespace') await this.disconnect(env);
      const ports = new Map<string, number>();
      for (const launch of launches)
        ports.set(launch.name, await pickPort(rt, target, env, launch.name, ports));
      if (rt.network === 'namespace') {
        const launched = new Set(launches.map((l) => l.name));
        const kept = Object.entries(env.apps).flatMap(([n, a]) =>
          !launched.has(n) && a.running ? [a.running.port] : [],
        );
        this.connect(target, env, [...ports.values(), ...kept]);
      }
      // A front door before each app when its application protects it or lets it sleep: the
      // door's URL is the app's `url`; its own port stays its `internalUrl`.
      const door = opts.frontDoor;
      if (door && (door.access === 'protected' || door.sleepAfterMs > 0)) env.door = door;
      else if (door || !env.door) {
        delete env.door;
        await this.doors.close(id);
        for (const app of Object.values(env.apps)) delete app.door;
      }
      const addresses: Record<string, AppAddress> = {};
      for (const name of declared) {
        const port = ports.get(name) ?? env.apps[name]?.port;
        if (port === undefined) continue;
        const internalUrl = `http://127.0.0.1:${port}`;
        const app = env.apps[name];
        if (env.door && app)
          app.door = await this.doors.open(id, target, env.door, name, port, app.door?.port);
        addresses[name] = { url: app?.door?.url ?? internalUrl, internalUrl };
      }
      const resolved = await this.provideServices(target, env, launches, addresses, opts);
      const awake = this.awake.get(id) ?? { target, launches: new Map() };
      awake.target = target;
      this.awake.set(id, awake);
      for (const launch of resolved) {
        await startApp(rt, target, env, launch, ports.get(launch.name)!);
        awake.launches.set(launch.name, launch);
      }
      // A deploy, restart or rebuild wakes a sleeping environment: its other apps start again too.
      if (env.asleepAt)
        await this.startAsleep(
          env,
          awake,
          launches.map((l) => l.name),
        );
      this.doors.touch(id);
      save(rt);
    });
  }

  async awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string) {
    const rt = this.rt;
    const id = envId(target);
    await locked(rt, id, async () => this.admit(target));
    void waitForApps(rt, target, apps, token)
      .then((outcome) => rt.opts.complete(token, outcome))
      .catch((err: Error) =>
        log.error('local readiness bookkeeping failed', { env: id, error: err.message }),
      );
  }

  /** A fence here is one number per environment in the state: nothing worth removing. */
  async pruneFences(_before: Date) {
    return { removed: 0 };
  }

  /**
   * Stop the environment's running apps and its builds in progress (builds are kept, so a restart or a
   * redeploy starts from them); an app that had exited says how, with the line of its output that says
   * why (`leadingCause`).
   */
  async stopApps(target: RuntimeTarget, reason: string): Promise<Record<string, string>> {
    const rt = this.rt;
    const id = envId(target);
    return locked(rt, id, async () => {
      const env = this.admit(target);
      await cancelBuilds(rt, id);
      const stopped: Record<string, string> = {};
      for (const [name, app] of Object.entries(env.apps)) {
        if (!app.running) continue;
        const exit = rt.exits.get(app.running.pid);
        if (exit) {
          const cause = leadingCause(logEnd(rt, target, name, 'app'));
          stopped[name] = scrub(rt, `exited (${exit})${cause ? `: ${cause}` : ''}`);
        } else stopped[name] = `stopped: ${reason}`;
        await stopApp(rt, app);
      }
      await stopServices(env);
      if (rt.network === 'namespace') await this.disconnect(env, netnsPath(rt, id));
      save(rt);
      return stopped;
    });
  }

  async teardown(target: RuntimeTarget) {
    const rt = this.rt;
    const id = envId(target);
    await locked(rt, id, async () => {
      const env = this.admit(target);
      await cancelBuilds(rt, id);
      for (const app of Object.values(env.apps)) await stopApp(rt, app);
      await dropServices(rt, id, env);
      await this.doors.close(id);
      this.awake.delete(id);
      delete env.door;
      delete env.asleepAt;
      env.apps = {};
      env.buildPids = [];
      await this.disconnect(env, netnsPath(rt, id));
      removeTree(workDir(rt, target));
      save(rt);
    });
  }

  // ---- lifecycle of the host process -----------------------------------------------------------------

  /**
   * After a restart: kill whatever a crash orphaned (processes recorded as ours that are still alive) and
   * mark every app stopped, keeping builds so apps can be started again from them; remove the working
   * copies no environment of the state owns (`removeUnowned`). Returns the number of
   * orphaned processes killed.
   */
  recover(): number {
    const rt = this.rt;
    let killed = 0;
    for (const [id, env] of Object.entries(rt.state.envs)) {
      const pids = [...env.buildPids, ...Object.values(env.apps).flatMap((a) => a.running?.pid ?? [])];
      for (const pid of pids) if (killOrphan(pid, id)) killed++;
      killed += killOrphanServices(id, env);
      env.buildPids = [];
      for (const app of Object.values(env.apps)) delete app.running;
      // A crash's pasta is stopped without waiting: the namespace goes, the next one is new.
      void this.disconnect(env, netnsPath(rt, id));
      // A build the crash interrupted left a working copy no app's build points at: remove it.
      const dir = join(rt.opts.workDir, ...id.split('/'));
      const kept = new Set(Object.values(env.apps).flatMap((a) => (a.build ? [a.build.dir] : [])));
      for (const entry of existsSync(dir) ? readdirSync(dir) : [])
        if (entry !== REBUILT_DIR && !kept.has(join(dir, entry)))
          rmSync(join(dir, entry), { recursive: true, force: true });
    }
    // Working copies of environments the state does not know (the data dir was deleted or replaced).
    const unowned = removeUnowned(rt);
    if (unowned > 0) log.info('removed working copies no environment owns', { environments: unowned });
    if (rt.isolation === 'bwrap') sweepSandboxCgroups();
    save(rt);
    return killed;
  }

  /** Stop every build and app (the server is shutting down); builds are kept for the next start. */
  async stop(): Promise<void> {
    const rt = this.rt;
    rt.stopping = true;
    const cancelled = [...rt.builds.values()].flatMap((m) => [...m.values()].map((b) => cancel(b)));
    await Promise.all(cancelled);
    await this.doors.closeAll();
    await Promise.all(
      Object.keys(rt.state.envs).map((id) =>
        locked(rt, id, async () => {
          const env = rt.state.envs[id]!;
          for (const app of Object.values(env.apps)) await stopApp(rt, app);
          await stopServices(env);
          await this.disconnect(env, netnsPath(rt, id));
        }),
      ),
    );
    save(rt);
  }

  /** Pid and port of an app's running process (tests look at it; not part of the port). */
  running(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): RunningRecord | undefined {
    return this.rt.state.envs[envId(target)]?.apps[app]?.running;
  }

  /** Where an app's log is kept. */
  logPath(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): string {
    return logPath(this.rt, target, app);
  }

  /** Where the output of an app's latest build is kept. */
  buildLogPath(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): string {
    return buildLogPath(this.rt, target, app);
  }

  /**
   * `app`: the output of the app's last 5 processes, a start header before each; `build`: its last 3
   * builds' logs, oldest first (logs.ts). Masked with the secret values this runtime started the app with
   * (none after a restart of the server: the caller masks the bundle), server paths replaced.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    return readLogs(this.rt, target, app, query);
  }

  /**
   * Wake a sleeping environment and resolve once its apps answer (a test run calls it first; a request to
   * a front door does the same); at once when it is awake. Counts as a request: its idle time restarts.
   */
  async wake(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): Promise<void> {
    const id = envId(target);
    this.doors.touch(id);
    await this.doors.wake(id);
  }

  /** Each app's own port on 127.0.0.1 (its door bypassed): what the service's own calls use. */
  async serviceUrls(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): Promise<Record<string, string>> {
    const id = envId(target);
    this.doors.touch(id);
    const urls: Record<string, string> = {};
    for (const [name, app] of Object.entries(this.rt.state.envs[id]?.apps ?? {}))
      if (app.port !== undefined) urls[name] = `http://127.0.0.1:${app.port}`;
    return urls;
  }

  // ---- sleep and wake (the front door) --------------------------------------------------------------

  /** Stop the apps of an environment that served nothing for its idle time; its state says since when. */
  private async sleepEnv(id: string): Promise<void> {
    const rt = this.rt;
    const asleepAt = await locked(rt, id, async () => {
      const env = rt.state.envs[id];
      if (!env?.door || env.asleepAt || rt.stopping) return undefined;
      const running = Object.values(env.apps).filter((a) => a.running);
      if (running.length === 0) return undefined;
      for (const app of running) await stopApp(rt, app);
      await stopServices(env);
      env.asleepAt = new Date().toISOString();
      save(rt);
      log.info('preview asleep', { env: id });
      return env.asleepAt;
    });
    const target = this.awake.get(id)?.target;
    if (asleepAt && target)
      await rt.opts
        .asleep?.(target, asleepAt)
        .catch((err: Error) =>
          log.warn('could not record a preview asleep', { env: id, error: err.message }),
        );
  }

  /** Start a sleeping environment's apps again from their last launch and wait until they answer. */
  private async wakeEnv(id: string): Promise<void> {
    const rt = this.rt;
    const awake = this.awake.get(id);
    const woke = await locked(rt, id, async () => {
      const env = rt.state.envs[id];
      if (!env?.asleepAt) return false;
      if (!awake) throw new Error('the preview cannot be woken after a restart of the server: redeploy it');
      await this.startAsleep(env, awake, []);
      save(rt);
      return true;
    });
    if (woke && awake)
      await rt.opts
        .asleep?.(awake.target, undefined)
        .catch((err: Error) => log.warn('could not record a preview awake', { env: id, error: err.message }));
  }

  /**
   * Start the apps of a sleeping environment (but `started`, which a deploy just started) from their last
   * launch and wait until each answers its readiness check (the runtime's ready timeout); then it is
   * awake. Called under the environment's lock.
   */
  private async startAsleep(
    env: EnvState,
    awake: { target: RuntimeTarget; launches: Map<string, AppLaunch> },
    started: string[],
  ): Promise<void> {
    const rt = this.rt;
    const id = envId(awake.target);
    const target = { ...awake.target, generation: env.fence };
    const names = Object.keys(env.apps).filter((n) => env.apps[n]!.port !== undefined);
    await startServices(rt, id, env);
    for (const name of names) {
      const launch = awake.launches.get(name);
      if (started.includes(name) || env.apps[name]!.running || !launch) continue;
      await startApp(rt, target, env, launch, env.apps[name]!.port!);
    }
    const deadline = Date.now() + rt.opts.readyTimeoutMs;
    for (const name of names) {
      const running = env.apps[name]!.running;
      if (!running) continue;
      for (;;) {
        const exit = rt.exits.get(running.pid);
        if (exit) throw new Error(`app ${name} exited (${exit}) while waking`);
        const inside =
          rt.network !== 'namespace' || listeningInside(running.pid, running.port, netnsPath(rt, id));
        if (inside && (await probeReady(running.port, awake.launches.get(name)?.spec.health)) === true) break;
        if (Date.now() > deadline) throw new Error(`app ${name} did not answer in time while waking`);
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    delete env.asleepAt;
    log.info('preview awake', { env: id });
  }

  // ---- internals -------------------------------------------------------------------------------------

  /**
   * The environment's services made sure of (services.ts: created on first use, started when stopped,
   * those no longer declared removed; a whole deploy without any removes them all), then `launches` with
   * every sibling and service reference resolved, each app's `migrate` run when it starts a new commit
   * and each service created empty seeded (once: a failed seed runs again next time). Under the environment's lock, before any app starts.
   */
  private async provideServices(
    target: RuntimeTarget,
    env: EnvState,
    launches: AppLaunch[],
    addresses: Record<string, AppAddress>,
    opts: DeployOptions,
  ): Promise<AppLaunch[]> {
    const rt = this.rt;
    const services = opts.services ?? [];
    if (services.length === 0 && opts.prune) await dropServices(rt, envId(target), env);
    const say = (line: string) =>
      closeSync(openLog(rt, target, services[0]?.spec.seedApp ?? launches[0]!.name, line));
    const { urls, unseeded } = services.length
      ? await ensureServices(rt, target, env, services, say)
      : { urls: {}, unseeded: [] };
    save(rt);
    const passwords = services.map((s) => s.password);
    const resolved = launches.map((l) => resolveServiceRefs(resolveAppRefs(l, addresses), urls, passwords));
    for (const launch of resolved) {
      const app = env.apps[launch.name]!;
      if (!launch.spec.migrate || app.migrated === app.build!.sha) continue;
      await runOnce(rt, target, env, launch, 'migrate', launch.spec.migrate);
      app.migrated = app.build!.sha;
    }
    for (const name of unseeded) {
      const service = services.find((s) => s.name === name)!;
      const record = env.services![name]!;
      if (service.spec.seed) {
        const launch = resolved.find((l) => l.name === service.spec.seedApp);
        if (!launch)
          throw new DeployFailed(
            `service ${name}: its seed app ${service.spec.seedApp} is not part of this deploy`,
          );
        await runOnce(rt, target, env, launch, 'seed', service.spec.seed);
      }
      record.seeded = true;
    }
    save(rt);
    return resolved;
  }

  /**
   * Make the environment's network namespace (if it has none) and start its pasta forwarding `ports`.
   * A failure is a DeployFailed: without it the apps could not be reached (or would share the host's).
   */
  private connect(target: RuntimeTarget, env: EnvState, ports: number[]) {
    const path = netnsPath(this.rt, envId(target));
    try {
      createNetns(path);
      env.net = { pasta: startPasta(path, ports), ports };
    } catch (err) {
      throw new DeployFailed(`the environment's network could not be set up: ${(err as Error).message}`);
    }
    save(this.rt);
  }

  /** Stop the environment's pasta; with `path`, remove its namespace too (nothing runs in it any more). */
  private async disconnect(env: EnvState, path?: string) {
    const pasta = env.net?.pasta;
    delete env.net;
    if (path) removeNetns(path);
    await stopPasta(pasta);
  }

  /** The environment's state if `target` is not older than the newest generation seen (which it raises). */
  private admit(target: RuntimeTarget): EnvState {
    const rt = this.rt;
    if (rt.stopping) throw new Superseded('the local runtime is shutting down');
    const id = envId(target);
    rt.state.envs[id] ??= { fence: 0, apps: {}, buildPids: [] };
    const env = rt.state.envs[id];
    if (target.generation < env.fence)
      throw new Superseded(`generation ${target.generation} superseded by ${env.fence}`);
    if (target.generation > env.fence) {
      // A newer generation owns the environment: builds of older ones stop now, whatever apps they build.
      for (const build of rt.builds.get(id)?.values() ?? [])
        if (build.generation < target.generation) void cancel(build);
    }
    env.fence = target.generation;
    return env;
  }
}
