import { type ChildProcess, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { keys } from '../../../manifest/tables.js';
import { newId } from '../../../shared/crypto.js';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/mask.js';
import { MaskingWriter } from '../../../shared/mask-stream.js';
import { ensurePrivateDir } from '../../../shared/private-dir.js';
import { DeployFailed, Superseded, TransientError } from '../../../shared/step-errors.js';
import type { SourceHost } from '../../source-host/port.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { type AppAddress, resolveAppRefs } from '../app-refs.js';
import { failureMessage } from '../log-cause.js';
import type {
  AppLaunch,
  AppSpec,
  DeployOptions,
  LogQuery,
  LogTarget,
  LogText,
  Runtime,
  RuntimeTarget,
} from '../port.js';
import {
  DEFAULT_LIMITS,
  DiskWatch,
  type LimitHit,
  limitedLaunchScript,
  limitMessage,
  SANDBOX_CGROUP_PREFIX,
  SandboxCgroups,
  type SandboxLimits,
  sweepSandboxCgroups,
} from './limits.js';
import { createNetns, listeningInside, removeNetns, startPasta, stopPasta } from './network.js';
import { bubblewrapArgs, type Isolation, liveGroupMembers, SANDBOX_HOME } from './sandbox.js';

/** The variables every app and build gets from the host; nothing else of the server's environment leaks. */
const INHERITED_VARS = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'TZ', 'NODE_EXTRA_CA_CERTS', 'SHELL'];
/** Marks a process as ours (and which app it is), so recovery never kills a stranger that reused a pid. */
const OWNER_VAR = 'PREVIEW_RUNTIME_APP';
const POLL_MS = 50;
/** How often a readiness wait heartbeats its task (well under the DeployApps state's HeartbeatSeconds). */
const HEARTBEAT_MS = 60_000;
const STOP_GRACE_MS = 5_000;
const LOG_TAIL_BYTES = 2_000;
/** How much of the end of a failed build's or process's output is searched for its cause. */
const CAUSE_SEARCH_BYTES = 64 * 1024;
/** Read beyond a log query's `maxBytes`: masking changes lengths, the caller cuts exactly. */
const LOG_READ_MARGIN = 64 * 1024;
/** The header a process start writes into its app's log (`openLog`): its output follows. */
const START_HEADER = /^--- \S+ start .* ---$/;

interface BuildRecord {
  buildId: string;
  dir: string;
  sha: string;
  generation: number;
}
interface RunningRecord {
  pid: number;
  port: number;
  buildId: string;
  startedAt: string;
}
interface AppState {
  build?: BuildRecord;
  running?: RunningRecord;
  /** The port last used, tried first on the next start so the app's URL stays the same. */
  port?: number;
}
interface EnvState {
  /** The newest generation seen; calls for older ones are refused. */
  fence: number;
  apps: Record<string, AppState>;
  /** Process groups of builds in progress (killed by recovery if a crash orphaned them). */
  buildPids: number[];
  /** Its network namespace's pasta and the ports it forwards (network `namespace`; see local/network.ts). */
  net?: { pasta: number; ports: number[] };
}
interface StateFile {
  envs: Record<string, EnvState>;
}

/**
 * A source host whose checkout may be cancelled (the local git one can: `signal` kills the clone, and the
 * call settles once git has exited). Any SourceHost fits; one without the option is waited for instead.
 */
type CheckoutHost = SourceHost;

export interface ProcessRuntimeOptions {
  /** State and logs (`<dataDir>/runtime`). */
  dataDir: string;
  /**
   * Where working copies are checked out and run. Not under the data dir: that usually sits inside this
   * project, and Node (like other toolchains) resolves upwards, so an app would pick up the control plane's
   * own package.json ("type": "module") and node_modules, and behave unlike its own clone.
   */
  workDir: string;
  sourceHost: CheckoutHost;
  /** Ends a callback task (`Workflows.completeTask`). */
  complete: (token: string, outcome: TaskOutcome) => Promise<void>;
  /** Tells a waiting callback task its work is alive (`Workflows.heartbeat`), while readiness is awaited. */
  heartbeat?: (token: string) => Promise<unknown>;
  /** How long an app may take to answer its readiness check. */
  readyTimeoutMs: number;
  /**
   * How builds and apps are confined (see local/sandbox.ts): `bwrap`, each in a bubblewrap sandbox that
   * sees only its own working copy and processes; `none`, plain processes of this user (single-tenant).
   * @default 'none'
   */
  isolation?: Isolation;
  /** The resource limits of each sandbox (isolation `bwrap` only; see local/limits.ts). */
  limits?: SandboxLimits;
  /**
   * `namespace`: each environment's builds and apps in a network namespace of their own, connected by
   * pasta (isolation `bwrap` only; see local/network.ts); `shared`: this machine's network.
   * @default 'shared'
   */
  network?: 'namespace' | 'shared';
  /** How often the working copies of running sandboxes are measured (tests shorten it). @default 30000 */
  diskCheckMs?: number;
}

interface ActiveBuild {
  generation: number;
  cancelled: boolean;
  children: Set<ChildProcess>;
  /** Aborts the checkouts in progress. */
  abort: AbortController;
  /** Checkouts in progress: a cancel waits for them before anything removes their working copies. */
  checkouts: Set<Promise<unknown>>;
}

/** `org/owner/repo/pr`: the environment's folder (for logs, state and working copies). */
const envId = (t: Pick<RuntimeTarget, 'orgId' | 'envKey'>) => {
  const { repo, prNumber } = keys.environments.parseEnvKey(t.envKey);
  return `${t.orgId}/${repo}/${prNumber}`;
};
const failure = (error: string, cause: string): TaskOutcome => ({ ok: false, error, cause });

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
 */
export class ProcessRuntime implements Runtime {
  private readonly root: string;
  private readonly statePath: string;
  private state: StateFile;
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly builds = new Map<string, Map<string, ActiveBuild>>();
  private readonly children = new Map<number, ChildProcess>();
  private readonly exits = new Map<number, string>();
  /** Per app (`envId/app`): the secret values it was started with, masked in what we quote of its output. */
  private readonly secretValues = new Map<string, string[]>();
  /** Per running sandbox (its pid): its cgroups, read for what it hit and removed once it is gone. */
  private readonly cgroups = new Map<number, SandboxCgroups>();
  /** Per ended app process: the limit it hit, if any. */
  private readonly hits = new Map<number, LimitHit | undefined>();
  /** Per running app process: when its output last arrived (readiness waits for it to settle). */
  private readonly lastOutput = new Map<number, () => number>();
  /** Sandboxes killed for their working copy's size (their pid). */
  private readonly overDisk = new Set<number>();
  /** Measures the working copies of running sandboxes (bwrap only). */
  private readonly diskWatch: DiskWatch;
  /** The resource limits of each sandbox (fixed for the runtime's life). */
  readonly limits: SandboxLimits;
  /** Whether each environment has a network namespace of its own (fixed for the runtime's life). */
  readonly network: 'namespace' | 'shared';
  private stopping = false;
  /** How builds and apps are confined (fixed for the runtime's life). */
  readonly isolation: Isolation;
  /** Server paths, replaced in what a caller is shown (`scrub`). */
  private readonly hiddenPaths: [string, string][];

  constructor(private readonly opts: ProcessRuntimeOptions) {
    this.isolation = opts.isolation ?? 'none';
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    this.diskWatch = new DiskWatch(
      this.limits.diskMiB,
      (pid) => {
        this.overDisk.add(pid);
        killGroup(pid, 'SIGKILL');
      },
      opts.diskCheckMs,
    );
    this.network = this.isolation === 'bwrap' && opts.network === 'namespace' ? 'namespace' : 'shared';
    this.root = join(opts.dataDir, 'runtime');
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    // Working copies hold apps' sources and builds: no other user may read them or plant anything there.
    ensurePrivateDir(opts.workDir, 'work dir');
    // Longest first: the work dir may sit inside the data dir.
    this.hiddenPaths = (
      [
        [resolve(opts.workDir), '<work dir>'],
        [realpathOr(opts.workDir), '<work dir>'],
        [resolve(opts.dataDir), '<data dir>'],
        [realpathOr(opts.dataDir), '<data dir>'],
      ] as [string, string][]
    ).sort((a, b) => b[0].length - a[0].length);
    this.statePath = join(this.root, 'state.json');
    this.state = existsSync(this.statePath)
      ? (JSON.parse(readFileSync(this.statePath, 'utf8')) as StateFile)
      : { envs: {} };
  }

  // ---- the Runtime port ------------------------------------------------------------------------------

  async build(target: RuntimeTarget, sha: string, apps: Record<string, AppSpec>, token: string) {
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
    await this.locked(id, async () => {
      const env = this.admit(target);
      // Builds run in the environment's namespace too (outbound through pasta, nothing of this machine).
      if (this.network === 'namespace' && !env.net) this.connect(target, env, []);
      const current = this.builds.get(id) ?? new Map<string, ActiveBuild>();
      for (const name of names) {
        const older = current.get(name);
        if (older) void this.cancel(older);
        current.set(name, active);
      }
      this.builds.set(id, current);
    });
    void this.runBuild(target, sha, apps, active)
      .then((outcome) => this.opts.complete(token, outcome))
      .catch((err: Error) => log.error('local build bookkeeping failed', { env: id, error: err.message }));
  }

  async deploy(target: RuntimeTarget, launches: AppLaunch[], opts: DeployOptions = {}) {
    const id = envId(target);
    await this.locked(id, async () => {
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
          await this.stopApp(app);
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
      if (this.network === 'namespace') await this.disconnect(env);
      const ports = new Map<string, number>();
      for (const launch of launches)
        ports.set(launch.name, await this.pickPort(target, env, launch.name, ports));
      if (this.network === 'namespace') {
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
      for (const launch of resolved) await this.launch(target, env, launch, ports.get(launch.name)!);
      this.save();
    });
  }

  async awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string) {
    const id = envId(target);
    await this.locked(id, async () => this.admit(target));
    void this.waitForApps(target, apps, token)
      .then((outcome) => this.opts.complete(token, outcome))
      .catch((err: Error) =>
        log.error('local readiness bookkeeping failed', { env: id, error: err.message }),
      );
  }

  /** A fence here is one number per environment in the state: nothing worth removing. */
  async pruneFences(_before: Date) {
    return { removed: 0 };
  }

  async teardown(target: RuntimeTarget) {
    const id = envId(target);
    await this.locked(id, async () => {
      const env = this.admit(target);
      const builds = [...(this.builds.get(id)?.values() ?? [])];
      this.builds.delete(id);
      await Promise.all(builds.map((b) => this.cancel(b)));
      for (const app of Object.values(env.apps)) await this.stopApp(app);
      env.apps = {};
      env.buildPids = [];
      await this.disconnect(env, this.netnsPath(target));
      removeTree(this.workDir(target));
      this.save();
    });
  }

  // ---- lifecycle of the host process -----------------------------------------------------------------

  /**
   * After a restart: kill whatever a crash orphaned (processes recorded as ours that are still alive) and
   * mark every app stopped, keeping builds so apps can be started again from them. Returns the number of
   * orphaned processes killed.
   */
  recover(): number {
    let killed = 0;
    for (const [id, env] of Object.entries(this.state.envs)) {
      const pids = [...env.buildPids, ...Object.values(env.apps).flatMap((a) => a.running?.pid ?? [])];
      for (const pid of pids) if (killOrphan(pid, id)) killed++;
      env.buildPids = [];
      for (const app of Object.values(env.apps)) delete app.running;
      // A crash's pasta is stopped without waiting: the namespace goes, the next one is new.
      void this.disconnect(env, join(this.root, 'netns', netnsName(id)));
      // A build the crash interrupted left a working copy no app's build points at: remove it.
      const dir = join(this.opts.workDir, ...id.split('/'));
      const kept = new Set(Object.values(env.apps).flatMap((a) => (a.build ? [a.build.dir] : [])));
      for (const entry of existsSync(dir) ? readdirSync(dir) : [])
        if (!kept.has(join(dir, entry))) rmSync(join(dir, entry), { recursive: true, force: true });
    }
    if (this.isolation === 'bwrap') sweepSandboxCgroups();
    this.save();
    return killed;
  }

  /** Stop every build and app (the server is shutting down); builds are kept for the next start. */
  async stop(): Promise<void> {
    this.stopping = true;
    const cancelled = [...this.builds.values()].flatMap((m) => [...m.values()].map((b) => this.cancel(b)));
    await Promise.all(cancelled);
    await Promise.all(
      Object.keys(this.state.envs).map((id) =>
        this.locked(id, async () => {
          const env = this.state.envs[id]!;
          for (const app of Object.values(env.apps)) await this.stopApp(app);
          await this.disconnect(env, join(this.root, 'netns', netnsName(id)));
        }),
      ),
    );
    this.save();
  }

  /** Pid and port of an app's running process (tests look at it; not part of the port). */
  running(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): RunningRecord | undefined {
    return this.state.envs[envId(target)]?.apps[app]?.running;
  }

  /** Where an app's log is kept. */
  logPath(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): string {
    return join(this.envDir(target), 'logs', `${app}.log`);
  }

  /** Where the output of an app's latest build is kept. */
  buildLogPath(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string): string {
    return join(this.envDir(target), 'logs', `${app}.build.log`);
  }

  /**
   * `app`: the output of the app's latest process (from its log's last start header); `build`: its latest
   * build's log. Masked with the secret values this runtime started the app with (none after a restart
   * of the server: the caller masks the bundle), server paths replaced.
   */
  async logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined> {
    const path = query.source === 'build' ? this.buildLogPath(target, app) : this.logPath(target, app);
    if (!existsSync(path)) return undefined;
    const read = readTail(path, query.maxBytes + LOG_READ_MARGIN);
    let text = read.text;
    let truncated = read.cut;
    if (query.source === 'app') {
      const lines = text.split('\n');
      let start = -1;
      for (let i = lines.length - 1; i >= 0; i--)
        if (START_HEADER.test(lines[i]!)) {
          start = i;
          break;
        }
      // The whole log read and no start in it: the app was built, never started.
      if (start < 0 && !read.cut) return undefined;
      if (start >= 0) {
        text = lines.slice(start + 1).join('\n');
        truncated = false;
      }
    }
    const masked = this.scrub(maskSecrets(text, this.secretValues.get(`${envId(target)}/${app}`) ?? []));
    const lines = masked.split('\n');
    if (lines.at(-1) === '') lines.pop();
    if (lines.length > query.tailLines) truncated = true;
    const kept = lines.slice(-query.tailLines);
    return { text: kept.length ? `${kept.join('\n')}\n` : '', truncated };
  }

  // ---- internals -------------------------------------------------------------------------------------

  /** The file the environment's network namespace is bound to. */
  private netnsPath(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): string {
    return join(this.root, 'netns', netnsName(envId(target)));
  }

  /**
   * Make the environment's network namespace (if it has none) and start its pasta forwarding `ports`.
   * A failure is a DeployFailed: without it the apps could not be reached (or would share the host's).
   */
  private connect(target: RuntimeTarget, env: EnvState, ports: number[]) {
    const path = this.netnsPath(target);
    try {
      createNetns(path);
      env.net = { pasta: startPasta(path, ports), ports };
    } catch (err) {
      throw new DeployFailed(`the environment's network could not be set up: ${(err as Error).message}`);
    }
    this.save();
  }

  /** Stop the environment's pasta; with `path`, remove its namespace too (nothing runs in it any more). */
  private async disconnect(env: EnvState, path?: string) {
    const pasta = env.net?.pasta;
    delete env.net;
    if (path) removeNetns(path);
    await stopPasta(pasta);
  }

  /** Working copies of the environment's apps (outside the data dir: see `workDir` in the options). */
  private workDir(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): string {
    return join(this.opts.workDir, ...envId(target).split('/'));
  }

  private envDir(target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): string {
    return join(this.root, ...envId(target).split('/'));
  }

  /** Serialize operations on one environment. */
  private locked<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(id) ?? Promise.resolve();
    const next = previous.then(fn, fn);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(id, settled);
    void settled.then(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return next;
  }

  /** The environment's state if `target` is not older than the newest generation seen (which it raises). */
  private admit(target: RuntimeTarget): EnvState {
    if (this.stopping) throw new Superseded('the local runtime is shutting down');
    const id = envId(target);
    this.state.envs[id] ??= { fence: 0, apps: {}, buildPids: [] };
    const env = this.state.envs[id];
    if (target.generation < env.fence)
      throw new Superseded(`generation ${target.generation} superseded by ${env.fence}`);
    if (target.generation > env.fence) {
      // A newer generation owns the environment: builds of older ones stop now, whatever apps they build.
      for (const build of this.builds.get(id)?.values() ?? [])
        if (build.generation < target.generation) void this.cancel(build);
    }
    env.fence = target.generation;
    return env;
  }

  /**
   * Cancel a build: abort its checkouts and kill its processes; resolves once all of them have exited
   * (so the caller may remove the working copies: nothing writes there any more).
   */
  private cancel(build: ActiveBuild): Promise<unknown> {
    build.cancelled = true;
    build.abort.abort();
    for (const child of build.children) killGroup(child.pid, 'SIGKILL');
    return Promise.all([...[...build.children].map(exitOf), ...build.checkouts]);
  }

  private async runBuild(
    target: RuntimeTarget,
    sha: string,
    apps: Record<string, AppSpec>,
    active: ActiveBuild,
  ): Promise<TaskOutcome> {
    const id = envId(target);
    const work = this.workDir(target);
    const made: Record<string, BuildRecord> = {};
    const buildOne = async (name: string, spec: AppSpec) => {
      // Cancelled before it began (a teardown got in first): nothing is created, nothing to wait for. From
      // here to the checkout's start nothing awaits, so a cancel sees either this or the checkout.
      if (active.cancelled) return;
      const buildId = newId();
      const dir = join(work, `${name}-${buildId}`);
      made[name] = { buildId, dir, sha, generation: target.generation };
      mkdirSync(work, { recursive: true });
      const what = `build ${sha.slice(0, 12)} (generation ${target.generation})`;
      // A marker in the app's log; the build's output goes to its own file, rewritten per build.
      closeSync(this.openLog(target, name, `${what}: output in ${name}.build.log`));
      const logFile = this.openLog(target, name, what, 'build');
      const checkout = this.opts.sourceHost.checkout(target.repoFullName, sha, dir, {
        signal: active.abort.signal,
      });
      const settled = checkout.then(
        () => undefined,
        () => undefined,
      );
      active.checkouts.add(settled);
      let checkedOut = false;
      try {
        await checkout;
        checkedOut = true;
      } catch (err) {
        if (active.cancelled) return;
        throw new DeployFailed(
          `app ${name}: checkout of ${sha.slice(0, 12)} failed: ${(err as Error).message}`,
        );
      } finally {
        active.checkouts.delete(settled);
        if (!checkedOut || !spec.build || active.cancelled) closeSync(logFile);
      }
      if (!spec.build || active.cancelled) return;
      // A build gets no secret bundle; the values its app last ran with are masked in its log anyway.
      const { child, drained, cgroups } = this.spawnCommand(
        spec.build,
        dir,
        logFile,
        { build: true },
        {
          ...spec.env,
          [OWNER_VAR]: `${id}/${name}`,
        },
        this.secretValues.get(`${id}/${name}`) ?? [],
        this.network === 'namespace' ? this.netnsPath(target) : undefined,
      );
      active.children.add(child);
      if (cgroups && child.pid !== undefined) this.diskWatch.add(child.pid, dir);
      this.trackBuildPid(id, child.pid, true);
      const result = await exitOf(child);
      await drainedOrLater(drained);
      const hit = this.overDisk.delete(child.pid ?? -1) ? 'disk' : cgroups?.hit();
      if (child.pid !== undefined) this.diskWatch.delete(child.pid);
      killGroup(child.pid, 'SIGKILL'); // nothing of a build outlives it (and its cgroups can go)
      cgroups?.remove();
      active.children.delete(child);
      this.trackBuildPid(id, child.pid, false);
      if (active.cancelled) return;
      if (result !== 'exit code 0') {
        const who = `app ${name}: build \`${spec.build}\``;
        const limit = this.limitFailure(who, hit, result, this.logEnd(target, name, 'build'));
        throw new DeployFailed(
          failureMessage(
            limit ? `${limit} and failed (${result})` : `${who} failed (${result})`,
            limit ? '' : this.logEnd(target, name, 'build'),
            this.logTail(target, name, 'build'),
            { target, app: name, source: 'build' },
          ),
        );
      }
    };
    const results = await Promise.allSettled(Object.entries(apps).map(([n, s]) => buildOne(n, s)));
    const discard = () => {
      for (const b of Object.values(made)) {
        try {
          removeTree(b.dir);
        } catch {
          // Logged; a teardown or the next recovery removes what is left. The token must still end.
        }
      }
    };
    if (active.cancelled || this.stopping) {
      this.forget(id, active);
      discard();
      return failure('Superseded', 'a newer build or a teardown replaced this one');
    }
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      this.forget(id, active);
      discard();
      const err = failed.reason as Error;
      return failure('DeployFailed', this.scrub(err.message));
    }
    return this.locked(id, async () => {
      const env = this.state.envs[id];
      this.forget(id, active);
      if (!env || target.generation < env.fence || active.cancelled) {
        discard();
        return failure('Superseded', 'a newer build or a teardown replaced this one');
      }
      for (const [name, record] of Object.entries(made)) {
        env.apps[name] ??= {};
        const app = env.apps[name];
        const previous = app.build;
        app.build = record;
        // The old working copy goes unless the running process still runs from it.
        if (previous && previous.buildId !== app.running?.buildId)
          rmSync(previous.dir, { recursive: true, force: true });
      }
      this.save();
      return { ok: true as const, output: {} };
    });
  }

  /** Drop a finished build from the in-progress table (where a newer one has not replaced it already). */
  private forget(id: string, active: ActiveBuild) {
    const builds = this.builds.get(id);
    if (!builds) return;
    for (const [name, build] of builds) if (build === active) builds.delete(name);
    if (builds.size === 0) this.builds.delete(id);
  }

  /**
   * Stop the app (if running) and choose its port: the one it had if it is free again, else a free one no
   * other app of this deploy took.
   */
  private async pickPort(
    target: RuntimeTarget,
    env: EnvState,
    name: string,
    taken: Map<string, number>,
  ): Promise<number> {
    const app = env.apps[name]!;
    const previousBuild = app.running?.buildId;
    await this.stopApp(app);
    if (previousBuild && previousBuild !== app.build!.buildId) {
      const old = join(this.workDir(target), `${name}-${previousBuild}`);
      rmSync(old, { recursive: true, force: true });
    }
    const others = new Set([
      ...taken.values(),
      ...Object.entries(env.apps).flatMap(([n, a]) => (n !== name && a.port ? [a.port] : [])),
    ]);
    let port = await freePort(others.has(app.port ?? 0) ? undefined : app.port);
    for (let attempt = 0; others.has(port) && attempt < 20; attempt++) port = await freePort();
    app.port = port;
    return port;
  }

  private async launch(target: RuntimeTarget, env: EnvState, launch: AppLaunch, port: number) {
    const app = env.apps[launch.name]!;
    const build = app.build!;
    const logFile = this.openLog(target, launch.name, `start ${build.sha.slice(0, 12)} on port ${port}`);
    const secrets = launch.secretKeys.map((k) => launch.vars[k]!).filter((v) => v.length > 0);
    const { child, drained, lastOutputAt, cgroups } = this.spawnCommand(
      launch.spec.command!,
      build.dir,
      logFile,
      { build: false },
      {
        ...launch.vars,
        PORT: String(port),
        [OWNER_VAR]: `${envId(target)}/${launch.name}`,
      },
      secrets,
      this.network === 'namespace' ? this.netnsPath(target) : undefined,
    );
    if (child.pid === undefined) {
      const how = this.isolation === 'bwrap' ? 'bwrap' : '/bin/sh';
      throw new DeployFailed(`app ${launch.name}: could not start ${how}`);
    }
    const pid = child.pid;
    this.exits.delete(pid); // a reused pid must not inherit an old process's exit
    this.children.set(pid, child);
    // Its exit is known once its output is in the log (a failure quotes the log's end).
    this.lastOutput.set(pid, lastOutputAt);
    void drained.then(() => this.lastOutput.delete(pid));
    if (cgroups) {
      this.cgroups.set(pid, cgroups);
      this.diskWatch.add(pid, build.dir);
    }
    this.hits.delete(pid);
    void exitOf(child).then(async (how) => {
      await drainedOrLater(drained);
      this.diskWatch.delete(pid);
      this.hits.set(pid, this.overDisk.delete(pid) ? 'disk' : cgroups?.hit());
      this.exits.set(pid, how);
      // What it left running is killed with the group when the app is stopped; until then its cgroups stay.
      this.children.delete(pid);
    });
    this.secretValues.set(`${envId(target)}/${launch.name}`, secrets);
    app.port = port;
    app.running = { pid, port, buildId: build.buildId, startedAt: new Date().toISOString() };
  }

  private async stopApp(app: AppState) {
    const running = app.running;
    if (!running) return;
    delete app.running;
    const child = this.children.get(running.pid);
    if (!child) {
      killGroup(running.pid, 'SIGKILL');
      this.cgroups.get(running.pid)?.remove();
      this.cgroups.delete(running.pid);
      return;
    }
    const exited = exitOf(child);
    // Who gets the SIGTERM: the processes of the group now. Not bwrap's own ones: the sandbox's init
    // ignores a SIGTERM from outside and ends with the command, and the one outside ends at once.
    const signalled = new Set(
      liveGroupMembers(running.pid)
        .filter((m) => m.comm !== 'bwrap')
        .map((m) => m.pid),
    );
    killGroup(running.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(running.pid, 'SIGKILL'), STOP_GRACE_MS);
    await exited;
    // The group's leader (the shell, or bwrap) may be gone while the app it started, which got the
    // SIGTERM too, is still shutting down: give those the grace period (Linux: seen in /proc; elsewhere
    // not waited for). A process that was not there yet when the SIGTERM went out (an app stopped as it
    // starts) never got it: it is not waited for, the SIGKILL below takes it.
    const deadline = Date.now() + STOP_GRACE_MS;
    const stillStopping = () => liveGroupMembers(running.pid).some((m) => signalled.has(m.pid));
    while (signalled.size > 0 && stillStopping() && Date.now() < deadline) await sleep(POLL_MS);
    clearTimeout(timer);
    // Make sure nothing it started outlives it.
    killGroup(running.pid, 'SIGKILL');
    this.cgroups.get(running.pid)?.remove();
    this.cgroups.delete(running.pid);
    this.hits.delete(running.pid);
    this.diskWatch.delete(running.pid);
  }

  /**
   * Start `command` with `/bin/sh -c` in `dir`, in its own process group, with the inherited variables
   * plus `vars`; inside a bubblewrap sandbox when isolation is on. Its output goes to `logFile` (which it
   * takes over and closes) through a pipe that masks `secrets` as it writes (see shared/mask-stream.ts):
   * the file never holds a value. `drained`: settles once all of its output is written and the file closed.
   */
  private spawnCommand(
    command: string,
    dir: string,
    logFile: number,
    opts: { build: boolean },
    vars: Record<string, string>,
    secrets: string[],
    netns?: string,
  ): { child: ChildProcess; drained: Promise<void>; lastOutputAt: () => number; cgroups?: SandboxCgroups } {
    const stdio: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
    let child: ChildProcess;
    let cgroups: SandboxCgroups | undefined;
    if (this.isolation === 'bwrap') {
      // Variables go through bwrap's own environment (not --setenv), so the sandbox leader's
      // /proc/<pid>/environ carries the owner marker recovery looks for.
      const env = { ...inherited(), HOME: SANDBOX_HOME, TMPDIR: '/tmp', ...vars };
      const hidden = [...new Set(this.hiddenPaths.map(([path]) => path))];
      const args = bubblewrapArgs(command, dir, { ...opts, hidden, tmpMiB: this.limits.tmpMiB });
      // A shell joins the sandbox's cgroups and sets its file size limit, then becomes bwrap (exec: the
      // same process, so the same process group and pid).
      cgroups = new SandboxCgroups(`${SANDBOX_CGROUP_PREFIX}${newId()}`, this.limits);
      const script = limitedLaunchScript(this.limits);
      // In the environment's network namespace: nsenter joins it and becomes bwrap (the same process).
      const enter = netns ? ['nsenter', `--net=${netns}`, '--'] : [];
      const argv = ['-c', script, 'sh', ...cgroups.procsFiles(), '--', ...enter, 'bwrap', ...args];
      child = spawn('/bin/sh', argv, {
        cwd: dir,
        env,
        stdio,
        detached: true,
      });
    } else {
      child = spawn('/bin/sh', ['-c', command], {
        cwd: dir,
        env: { ...inherited(), ...vars },
        stdio,
        detached: true,
      });
    }
    const { drained, lastOutputAt } = maskedOutput(child, logFile, secrets);
    return { child, drained, lastOutputAt, cgroups };
  }

  /** What a sandbox that failed hit of its limits, as its failure names it (bwrap only: none otherwise). */
  private limitFailure(who: string, hit: LimitHit | undefined, exit: string, output: string) {
    if (this.isolation !== 'bwrap') return undefined;
    return limitMessage(who, this.limits, hit, exit, output);
  }

  /** `text` with this machine's data and work dir paths replaced by placeholders (callers see it). */
  private scrub(text: string): string {
    let out = text;
    for (const [path, name] of this.hiddenPaths) if (path.length > 1) out = out.split(path).join(name);
    return out;
  }

  private async waitForApps(
    target: RuntimeTarget,
    apps: Record<string, AppSpec>,
    token: string,
  ): Promise<TaskOutcome> {
    const id = envId(target);
    const deadline = Date.now() + this.opts.readyTimeoutMs;
    // DeployApps has HeartbeatSeconds: a readiness wait longer than that must say it is alive.
    let beatAt = Date.now() + HEARTBEAT_MS;
    const pending = new Set(Object.keys(apps));
    const lastSeen = new Map<string, string>();
    while (pending.size > 0) {
      if (Date.now() >= beatAt) {
        beatAt = Date.now() + HEARTBEAT_MS;
        await this.opts.heartbeat?.(token);
      }
      const env = this.state.envs[id];
      if (this.stopping || !env || target.generation < env.fence)
        return failure('Superseded', 'a newer request or a teardown replaced this one');
      for (const name of [...pending]) {
        const running = env.apps[name]?.running;
        if (!running) return failure('DeployFailed', `app ${name} is not running`);
        const exit = this.exits.get(running.pid);
        if (exit) {
          const logEnd = this.logEnd(target, name, 'app');
          const limit = this.limitFailure(`app ${name}`, this.hits.get(running.pid), exit, logEnd);
          return failure(
            'DeployFailed',
            this.scrub(
              failureMessage(
                limit
                  ? `${limit} and exited (${exit}) before it was ready`
                  : `app ${name} exited (${exit}) before it was ready`,
                // A limit hit is the cause: no line of the output is put before it.
                limit ? '' : logEnd,
                this.logTail(target, name, 'app'),
                { target, app: name, source: 'app' },
              ),
            ),
          );
        }
        // Through pasta the host's side of the port accepts before the app listens: ask the namespace.
        const probe =
          this.network === 'namespace' && !listeningInside(running.pid, running.port, this.netnsPath(target))
            ? `port ${running.port} is not listened on yet`
            : await probeReady(running.port, apps[name]!.health);
        if (probe === true) pending.delete(name);
        else lastSeen.set(name, probe);
      }
      if (pending.size === 0) break;
      if (Date.now() > deadline) {
        const name = [...pending][0]!;
        const seconds = Math.round(this.opts.readyTimeoutMs / 1000);
        return failure(
          'DeployFailed',
          `app ${name} did not become ready within ${seconds} s: ${lastSeen.get(name) ?? 'no answer'}`,
        );
      }
      await sleep(POLL_MS);
    }
    const env = this.state.envs[id]!;
    // What an app printed before it was ready is in its log once it is reported ready: its output passes
    // through a pipe (masked as written), and may still be arriving while it already listens.
    const settleUntil = Date.now() + OUTPUT_SETTLE_MAX_MS;
    for (const name of Object.keys(apps)) {
      const pid = env.apps[name]?.running?.pid;
      const last = pid === undefined ? undefined : this.lastOutput.get(pid);
      while (last && Date.now() - last() < OUTPUT_QUIET_MS && Date.now() < settleUntil) await sleep(20);
    }
    const urls: Record<string, string> = {};
    for (const [name, app] of Object.entries(env.apps))
      if (app.running) urls[name] = `http://127.0.0.1:${app.running.port}`;
    return { ok: true, output: { urls } };
  }

  /** Open an app's log (appending) or its build log (rewritten: the latest build only), with a header. */
  private openLog(target: RuntimeTarget, app: string, what: string, kind: 'app' | 'build' = 'app'): number {
    const path = kind === 'build' ? this.buildLogPath(target, app) : this.logPath(target, app);
    mkdirSync(join(path, '..'), { recursive: true });
    const fd = openSync(path, kind === 'build' ? 'w' : 'a', 0o600);
    writeFileSync(fd, `--- ${new Date().toISOString()} ${what} ---\n`);
    return fd;
  }

  /**
   * The end of an app's log or build log (the last `bytes`), secret values masked. An app may print its
   * own secrets (a stack trace with a connection string, a PEM key): never quote them. Masked before
   * anything splits the text, so a multi-line value is caught whole.
   */
  private logEnd(target: RuntimeTarget, app: string, kind: 'app' | 'build', bytes = CAUSE_SEARCH_BYTES) {
    const path = kind === 'build' ? this.buildLogPath(target, app) : this.logPath(target, app);
    if (!existsSync(path)) return '';
    let { text } = readTail(path, bytes);
    if (kind === 'app') {
      // The latest process only.
      const lines = text.split('\n');
      const start = lines.findLastIndex((l) => START_HEADER.test(l));
      if (start >= 0) text = lines.slice(start + 1).join('\n');
    }
    return maskSecrets(text, this.secretValues.get(`${envId(target)}/${app}`) ?? []);
  }

  /** The end of an app's log, on one line, for an error message. */
  private logTail(target: RuntimeTarget, app: string, kind: 'app' | 'build'): string {
    const masked = this.logEnd(target, app, kind, LOG_TAIL_BYTES);
    const lines = masked.split('\n').filter((l) => l.trim() && !l.startsWith('--- '));
    return lines.slice(-5).join(' | ').slice(-500) || '(no output)';
  }

  private trackBuildPid(id: string, pid: number | undefined, add: boolean) {
    const env = this.state.envs[id];
    if (!env || pid === undefined) return;
    env.buildPids = add ? [...env.buildPids, pid] : env.buildPids.filter((p) => p !== pid);
    this.save();
  }

  private save() {
    const tmp = `${this.statePath}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.state), { mode: 0o600 });
    renameSync(tmp, this.statePath);
  }
}

// ---- helpers ---------------------------------------------------------------------------------------------

function inherited(): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const k of INHERITED_VARS) if (process.env[k] !== undefined) vars[k] = process.env[k]!;
  return vars;
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/**
 * `rm -rf`, retried a few times (a directory may be busy a moment after its last writer was killed); a
 * failure names no path (the error reaches API callers as the environment's `error`) and is retried by
 * the state machine.
 */
function removeTree(path: string) {
  try {
    rmSync(path, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    log.error('could not remove a working copy', { path, code });
    throw new TransientError(`could not remove the working copies (${code})`);
  }
}

/**
 * The last `bytes` of a file as text; `cut` when the file is longer. Read from mid-file, the first line
 * may be a fragment (of a secret, say): it is dropped.
 */
function readTail(path: string, bytes: number): { text: string; cut: boolean } {
  const size = statSync(path).size;
  const fd = openSync(path, 'r');
  const buf = Buffer.alloc(Math.min(size, bytes));
  try {
    readSyncAt(fd, buf, size - buf.length);
  } finally {
    closeSync(fd);
  }
  const raw = buf.toString('utf8');
  const cut = size > buf.length;
  return { text: cut ? raw.slice(raw.indexOf('\n') + 1) : raw, cut };
}

function readSyncAt(fd: number, buf: Buffer, position: number) {
  // readFileSync cannot start mid-file; readSync with a position can.
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, position + done);
    if (n === 0) break;
    done += n;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The file name of an environment's network namespace (`org/owner/repo/pr`, one path segment). */
const netnsName = (id: string) => id.replace(/[^A-Za-z0-9._-]/g, '_');

/** Readiness waits until an app's output has been quiet this long (at most `OUTPUT_SETTLE_MAX_MS`). */
const OUTPUT_QUIET_MS = 100;
const OUTPUT_SETTLE_MAX_MS = 2_000;
/** How long after a process exits its output may still be arriving (a child it left holds the pipe). */
const DRAIN_WAIT_MS = 2_000;

/**
 * Copy a child's stdout and stderr into `fd` through a `MaskingWriter`, and close `fd` once both end (or
 * the child could not start). Writes are synchronous and in arrival order, as the file's own would be.
 */
function maskedOutput(
  child: ChildProcess,
  fd: number,
  secrets: string[],
): { drained: Promise<void>; lastOutputAt: () => number } {
  let last = Date.now();
  const writer = new MaskingWriter(secrets, (text) => {
    try {
      writeSync(fd, text);
    } catch (err) {
      log.error('could not write to a log file', { code: (err as NodeJS.ErrnoException).code ?? 'error' });
    }
  });
  const streams = [child.stdout, child.stderr].filter((s): s is Readable => s !== null);
  const drained = new Promise<void>((resolve) => {
    let open = streams.length;
    const done = () => {
      if (--open > 0) return;
      writer.end();
      closeSync(fd);
      resolve();
    };
    if (open === 0) {
      open = 1;
      done();
      return;
    }
    streams.forEach((stream, i) => {
      stream.on('data', (chunk: Buffer) => {
        last = Date.now();
        writer.push(chunk, String(i));
      });
      stream.once('close', done);
    });
  });
  return { drained, lastOutputAt: () => last };
}

/** Wait for a process's output to be written, but not for ever (a daemon it started may keep the pipe). */
const drainedOrLater = (drained: Promise<void>) => Promise.race([drained, sleep(DRAIN_WAIT_MS)]);

/** Resolves with how a child ended: `exit code N` or `signal S`. */
function exitOf(child: ChildProcess): Promise<string> {
  if (child.exitCode !== null) return Promise.resolve(`exit code ${child.exitCode}`);
  if (child.signalCode !== null) return Promise.resolve(`signal ${child.signalCode}`);
  return new Promise((resolve) => {
    child.once('error', (err) => resolve(`spawn error ${err.message}`));
    child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `exit code ${code}`));
  });
}

/** Signal a whole process group (the shell and what it started); false if it is gone. */
function killGroup(pid: number | undefined, signal: NodeJS.Signals): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Kill a process group a crash left behind, if its leader is still ours (Linux: checked in /proc). */
function killOrphan(pid: number, envPrefix: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const environ = `/proc/${pid}/environ`;
  if (existsSync(environ)) {
    try {
      const vars = readFileSync(environ, 'utf8').split('\0');
      if (!vars.some((v) => v.startsWith(`${OWNER_VAR}=${envPrefix}/`))) return false;
    } catch {
      return false;
    }
  }
  return killGroup(pid, 'SIGKILL');
}

/** A port free on 127.0.0.1, preferring `preferred` (so an app keeps its URL across restarts). */
async function freePort(preferred?: number): Promise<number> {
  const tryListen = (port: number) =>
    new Promise<number | undefined>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(undefined));
      server.listen(port, '127.0.0.1', () => {
        const { port: bound } = server.address() as { port: number };
        server.close(() => resolve(bound));
      });
    });
  if (preferred) {
    // The process just stopped may take a moment to release it.
    for (let attempt = 0; attempt < 20; attempt++) {
      const port = await tryListen(preferred);
      if (port) return port;
      await sleep(50);
    }
  }
  const port = await tryListen(0);
  if (!port) throw new DeployFailed('no free port on 127.0.0.1');
  return port;
}

/** true when ready; otherwise what the check saw (for the error message). */
async function probeReady(port: number, health: string | undefined): Promise<true | string> {
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
    // A redirect is not followed (issue 23): the service would fetch whatever it names.
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
