import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keys } from '../../../manifest/tables.js';
import type { SourceHost } from '../../source-host/port.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { RuntimeTarget } from '../port.js';
import type { DiskWatch, LimitHit, SandboxCgroups, SandboxLimits } from './limits.js';
import type { Isolation } from './sandbox.js';

/*
 * What the local runtime knows, shared by its parts (process.ts composes them): what runs, recorded in
 * `<dataDir>/runtime/state.json` so a restarted server finds what a crash left behind; what is in flight,
 * in memory; one lock per environment.
 */

export const POLL_MS = 50;

export interface BuildRecord {
  buildId: string;
  dir: string;
  sha: string;
  generation: number;
}
export interface RunningRecord {
  pid: number;
  port: number;
  buildId: string;
  startedAt: string;
}
export interface AppState {
  build?: BuildRecord;
  running?: RunningRecord;
  /** The port last used, tried first on the next start so the app's URL stays the same. */
  port?: number;
  /** Its front door's port and public URL, when it has one (front-door.ts); its `port` is then internal. */
  door?: { port: number; url: string };
  /** The commit its `migrate` last ran for (it runs again before a new commit starts). */
  migrated?: string;
}
export interface EnvState {
  /** The newest generation seen; calls for older ones are refused. */
  fence: number;
  apps: Record<string, AppState>;
  /** Process groups of builds in progress (killed by recovery if a crash orphaned them). */
  buildPids: number[];
  /** Its network namespace's pasta and the ports it forwards (network `namespace`; see local/network.ts). */
  net?: { pasta: number; ports: number[] };
  /** Its front door's settings (front-door.ts), when its apps have one. */
  door?: import('../port.js').FrontDoorSettings;
  /** When its apps were stopped for being idle; absent while awake. */
  asleepAt?: string;
  /** Its services (preview.yaml `services:`; services.ts). */
  services?: Record<string, ServiceRecord>;
}
/** A service as the runtime's state records it. */
export interface ServiceRecord {
  kind: 'postgres' | 'redis';
  /** The major it runs (postgres: may differ from the one declared; see the deploy's log). */
  major: string;
  port: number;
  pid?: number;
  createdAt: string;
  /** Its seed ran (a service created empty is seeded once, by the first deploy that gets that far). */
  seeded?: boolean;
  /** It was copied from the main branch's: never seeded. */
  copied?: boolean;
}

export interface StateFile {
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
   * The ports apps may listen on (PREVIEW_APP_PORTS); a deploy that finds none free there fails saying so.
   * @default any free port the system gives
   */
  appPorts?: { first: number; last: number };
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
  /** An application's access key (front doors of protected previews check links and cookies with it). */
  accessKey?: (applicationId: string) => Promise<string | undefined>;
  /**
   * An environment fell asleep (`asleepAt`) or woke (undefined): the store records its phase `asleep`.
   * Best effort: a failure is logged.
   */
  asleep?: (target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, asleepAt: string | undefined) => Promise<void>;
}

export interface ActiveBuild {
  generation: number;
  cancelled: boolean;
  children: Set<ChildProcess>;
  /** Aborts the checkouts in progress. */
  abort: AbortController;
  /** Checkouts in progress: a cancel waits for them before anything removes their working copies. */
  checkouts: Set<Promise<unknown>>;
}

/** The local runtime's state and configuration, which `ProcessRuntime` holds and its parts are passed. */
export interface LocalRuntime {
  readonly opts: ProcessRuntimeOptions;
  readonly root: string;
  readonly statePath: string;
  state: StateFile;
  readonly locks: Map<string, Promise<unknown>>;
  readonly builds: Map<string, Map<string, ActiveBuild>>;
  readonly children: Map<number, ChildProcess>;
  readonly exits: Map<number, string>;
  /** Per app (`envId/app`): the secret values it was started with, masked in what we quote of its output. */
  readonly secretValues: Map<string, string[]>;
  /** Per running sandbox (its pid): its cgroups, read for what it hit and removed once it is gone. */
  readonly cgroups: Map<number, SandboxCgroups>;
  /** Per ended app process: the limit it hit, if any. */
  readonly hits: Map<number, LimitHit | undefined>;
  /** Per running app process: when its output last arrived (readiness waits for it to settle). */
  readonly lastOutput: Map<number, () => number>;
  /** Sandboxes killed for their working copy's size (their pid). */
  readonly overDisk: Set<number>;
  /** Measures the working copies of running sandboxes (bwrap only). */
  readonly diskWatch: DiskWatch;
  /** The resource limits of each sandbox (fixed for the runtime's life). */
  readonly limits: SandboxLimits;
  /** Whether each environment has a network namespace of its own (fixed for the runtime's life). */
  readonly network: 'namespace' | 'shared';
  stopping: boolean;
  /** How builds and apps are confined (fixed for the runtime's life). */
  readonly isolation: Isolation;
  /** Server paths, replaced in what a caller is shown (`scrub`). */
  readonly hiddenPaths: [string, string][];
}

/** `org/owner/repo/pr`: the environment's folder (for logs, state and working copies). */
export const envId = (t: Pick<RuntimeTarget, 'orgId' | 'envKey'>) => {
  const { repo, prNumber } = keys.environments.parseEnvKey(t.envKey);
  return `${t.orgId}/${repo}/${prNumber}`;
};
export const failure = (error: string, cause: string): TaskOutcome => ({ ok: false, error, cause });

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What `state.json` holds (nothing yet on a first start). */
export function loadState(statePath: string): StateFile {
  return existsSync(statePath) ? (JSON.parse(readFileSync(statePath, 'utf8')) as StateFile) : { envs: {} };
}

export function save(rt: LocalRuntime) {
  const tmp = `${rt.statePath}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(rt.state), { mode: 0o600 });
  renameSync(tmp, rt.statePath);
}

/** Serialize operations on one environment. */
export function locked<T>(rt: LocalRuntime, id: string, fn: () => Promise<T>): Promise<T> {
  const previous = rt.locks.get(id) ?? Promise.resolve();
  const next = previous.then(fn, fn);
  const settled = next.then(
    () => undefined,
    () => undefined,
  );
  rt.locks.set(id, settled);
  void settled.then(() => {
    if (rt.locks.get(id) === settled) rt.locks.delete(id);
  });
  return next;
}

/** The file the environment's network namespace (`id`: `org/owner/repo/pr`) is bound to. */
export function netnsPath(rt: LocalRuntime, id: string): string {
  return join(rt.root, 'netns', netnsName(id));
}

/** The file name of an environment's network namespace (`org/owner/repo/pr`, one path segment). */
const netnsName = (id: string) => id.replace(/[^A-Za-z0-9._-]/g, '_');
