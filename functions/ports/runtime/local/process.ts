import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { log } from '../../../shared/log.js';
import { ensurePrivateDir } from '../../../shared/private-dir.js';
import { DeployFailed, Superseded } from '../../../shared/step-errors.js';
import { type AppAddress, resolveAppRefs } from '../app-refs.js';
import type {
  AppLaunch,
  AppSpec,
  BuildOptions,
  DeployOptions,
  LogQuery,
  LogTarget,
  LogText,
  Runtime,
  RuntimeTarget,
} from '../port.js';
import { cancel, runBuild } from './builds.js';
import { DEFAULT_LIMITS, DiskWatch, type SandboxLimits, sweepSandboxCgroups } from './limits.js';
import { buildLogPath, logPath, readLogs } from './logs.js';
import { createNetns, removeNetns, startPasta, stopPasta } from './network.js';
import { pickPort, waitForApps } from './readiness.js';
import type { Isolation } from './sandbox.js';
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
import { hiddenPathsOf, removeTree, workDir } from './working-copies.js';

export type { ProcessRuntimeOptions } from './state.js';

/**
 * The local runtime: every app of a preview environment is a process on this machine. Per app, a working
 * copy of the head SHA (from the source host) where `build` runs and then `command`, with `PORT` set to a
 * free port and the app's env (preview.yaml env + its secret bundle). Readiness is the health path answering
 * 2xx (or the port accepting connections), the URL is `http://127.0.0.1:<port>`. The app's output goes to
 * `<dataDir>/runtime/<org>/<owner>/<repo>/<pr>/logs/<app>.log` (appended, a `--- … start … ---` header per
 * process), its latest build's to `<app>.build.log` beside it (rewritten per build; a marker line in the
 * app's log says when one began); working copies live under `workDir`.
 *
 * What runs is recorded in `<dataDir>/runtime/state.json`, so a restarted server can find what a crash left
 * behind (`recover`). Operations on one environment are serialized; builds run outside that lock and are
 * cancelled when a newer generation or a teardown arrives.
 *
 * This class composes the parts beside it, each given its state (`LocalRuntime`, state.ts): the builds
 * (builds.ts), process supervision (supervision.ts), ports and readiness (readiness.ts), logs (logs.ts) and
 * working copies (working-copies.ts).
 */
export class ProcessRuntime implements Runtime {
  /** Its state and configuration, which its parts (builds.ts, supervision.ts, readiness.ts …) are given. */
  private readonly rt: LocalRuntime;
  /** The resource limits of each sandbox (fixed for the runtime's life). */
  readonly limits: SandboxLimits;
  /** Whether each environment has a network namespace of its own (fixed for the runtime's life). */
  readonly network: 'namespace' | 'shared';
  /** How builds and apps are confined (fixed for the runtime's life). */
  readonly isolation: Isolation;

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
      const addresses: Record<string, AppAddress> = {};
      for (const name of declared) {
        const port = ports.get(name) ?? env.apps[name]?.port;
        if (port === undefined) continue;
        const url = `http://127.0.0.1:${port}`;
        addresses[name] = { url, internalUrl: url };
      }
      const resolved = launches.map((l) => resolveAppRefs(l, addresses));
      for (const launch of resolved) await startApp(rt, target, env, launch, ports.get(launch.name)!);
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

  async teardown(target: RuntimeTarget) {
    const rt = this.rt;
    const id = envId(target);
    await locked(rt, id, async () => {
      const env = this.admit(target);
      const builds = [...(rt.builds.get(id)?.values() ?? [])];
      rt.builds.delete(id);
      await Promise.all(builds.map((b) => cancel(b)));
      for (const app of Object.values(env.apps)) await stopApp(rt, app);
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
   * mark every app stopped, keeping builds so apps can be started again from them. Returns the number of
   * orphaned processes killed.
   */
  recover(): number {
    const rt = this.rt;
    let killed = 0;
    for (const [id, env] of Object.entries(rt.state.envs)) {
      const pids = [...env.buildPids, ...Object.values(env.apps).flatMap((a) => a.running?.pid ?? [])];
      for (const pid of pids) if (killOrphan(pid, id)) killed++;
      env.buildPids = [];
      for (const app of Object.values(env.apps)) delete app.running;
      // A crash's pasta is stopped without waiting: the namespace goes, the next one is new.
      void this.disconnect(env, netnsPath(rt, id));
      // A build the crash interrupted left a working copy no app's build points at: remove it.
      const dir = join(rt.opts.workDir, ...id.split('/'));
      const kept = new Set(Object.values(env.apps).flatMap((a) => (a.build ? [a.build.dir] : [])));
      for (const entry of existsSync(dir) ? readdirSync(dir) : [])
        if (!kept.has(join(dir, entry))) rmSync(join(dir, entry), { recursive: true, force: true });
    }
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
    await Promise.all(
      Object.keys(rt.state.envs).map((id) =>
        locked(rt, id, async () => {
          const env = rt.state.envs[id]!;
          for (const app of Object.values(env.apps)) await stopApp(rt, app);
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
   * `app`: the output of the app's latest process (from its log's last start header); `build`: its latest
   * build's log. Masked with the secret values this runtime started the app with (none after a restart
   * of the server: the caller masks the bundle), server paths replaced.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    return readLogs(this.rt, target, app, query);
  }

  // ---- internals -------------------------------------------------------------------------------------

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
