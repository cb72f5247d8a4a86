/**
 * The Runtime port: where preview apps are built and run. It plays five roles, each an interface below,
 * so a caller names the one it needs and the registry hands out no more (ports/registry/runtime/):
 *
 * | Role           | What it does                                      | Who calls it                           |
 * |----------------|---------------------------------------------------|----------------------------------------|
 * | `ImageBuilder` | build an environment's apps at a commit           | BuildImages                            |
 * | `AppRunner`    | (re)start apps from their builds, await readiness | DeployApps                             |
 * | `AppTeardown`  | stop apps, tear an environment down, prune fences | MarkFailed, TearDown, the expiry sweep |
 * | `AppLogs`      | read the end of an app's or its build's output    | the app-logs route                     |
 * | `FrontDoor`    | wake a sleeping environment, reach apps directly  | the test-run executor                  |
 *
 * `Runtime` is every role at once: what an adapter family implements as a whole (`local/process.ts`:
 * processes on this machine; `cloud.ts`: images on CodeBuild, apps on EKS) and what its contract suite
 * (runtime.contract.ts) exercises. The front door is a role only a runtime that keeps a door of its own
 * plays (local); in AWS the engines in the cluster are the door (eks/front-door.ts), so `Runtime` has it
 * optional. Who may open an environment and when it sleeps reaches a runtime with each deploy
 * (`DeployOptions.frontDoor`).
 *
 * Long waits (builds, rollouts) complete through `Workflows.completeTask` with the token they were given,
 * so a state machine waits on a callback instead of polling. Every failure a runtime reports, thrown or
 * through a token, is named by one of `shared/step-errors.ts`, which the ASL Retry/Catch lists match:
 * `Superseded` (a newer generation owns the environment: the execution ends quietly), `TransientError`
 * (retried), `DeployFailed` (recorded as the environment's `error`).
 */

/** One app of a preview environment, as `preview.yaml` declares it (validated by core/preview-config.ts). */
export interface AppSpec {
  port: number;
  command?: string;
  build?: string;
  health?: string;
  env?: Record<string, string>;
  dockerfile?: string;
  context?: string;
  /** Build arguments (`docker build --build-arg`; locally, environment variables of `build`). */
  buildArgs?: Record<string, string>;
  /** Run before the app's new commit starts, on every deploy of a new commit (its services are up). */
  migrate?: string;
}

/** A database of a preview environment, as `preview.yaml` `services:` declares it (core/preview-services.ts). */
export interface ServiceSpec {
  kind: 'postgres' | 'redis';
  /** The major version asked for (postgres 14-17, redis 7); a runtime may serve another and says so. */
  version: string;
  /** postgres only: a copy of the main-branch environment's service of the same name, made on creation. */
  from?: 'main';
  /** Run once in `seedApp`'s working copy or image when the service is created empty (not when copied). */
  seed?: string;
  /** The app whose working copy or image runs `seed` and whose `migrate` runs first. */
  seedApp: string;
}

/**
 * A service to provide with a deploy: its spec and the credentials the environment's apps connect with
 * (generated once per service and environment, kept in the secret store: core/environments/services.ts).
 * A runtime never repeats `password` (in errors, logs, responses); it masks it in what it quotes.
 */
export interface ServiceLaunch {
  name: string;
  spec: ServiceSpec;
  user: string;
  password: string;
}

/**
 * A service as the status answer's `services` shows it: `creating` until the runtime has it ready (on EKS
 * until CloudNativePG reports its Cluster healthy, or Redis is rolled out, and its seed ran), `ready`,
 * `asleep` with its preview, `stopped` once the environment failed, `failed` when the service itself did
 * (its Cluster or Deployment, or its seed).
 */
export interface ServiceState {
  kind: ServiceSpec['kind'];
  status: 'creating' | 'ready' | 'asleep' | 'stopped' | 'failed';
}

/**
 * What an app's build reads from the repository at a commit, as git object ids (core/build-inputs.ts):
 * the tree of its build context, and the blob of its Dockerfile when that lies outside the context.
 */
export interface BuildInputs {
  context: string;
  dockerfile?: string;
}

/** How an app got its image or build output: built now, or reused from an earlier build of the same identity. */
export interface BuildResult {
  result: 'built' | 'reused';
  /** The commit the build was made from (for a reused one, an earlier commit, perhaps another PR's). */
  commit: string;
}

/**
 * The environment a runtime call acts for, with the generation of the request behind it. Runtimes fence
 * by generation: once they have seen generation N for an environment, a call for an older one is refused
 * with `Superseded` and changes nothing.
 */
export interface RuntimeTarget {
  orgId: string;
  envKey: string;
  repoFullName: string;
  prNumber: number;
  generation: number;
}

/** An app to (re)start: its spec and the environment variables it runs with (plain env + secrets). */
export interface AppLaunch {
  name: string;
  spec: AppSpec;
  vars: Record<string, string>;
  /** Which of `vars` come from the secret bundle: a runtime never repeats their values (in errors, logs). */
  secretKeys: string[];
  /** The image to run (`uri@sha256:…`), for runtimes that run images; what `build` reported for the app. */
  image?: string;
  /** Other values never repeated, like secret values: its services' passwords (app-refs.ts). */
  masked?: string[];
}

export interface BuildOptions {
  /**
   * Build again even where a build of the same identity exists (an app redeploy in `rebuild` mode): a new
   * image or build output that only this environment takes. Without it a runtime reuses what any earlier
   * build of the application with the same identity made (ports/runtime/build-identity.ts).
   */
  rebuild?: boolean;
  /**
   * Each app's build inputs at the commit (the ReadConfig step's `buildInputs`). An app without them is
   * identified by the commit alone (nothing built at another commit is reused for it).
   */
  inputs?: Record<string, BuildInputs>;
  /**
   * Whether `target.generation` still owns the environment, as the store that bumps generations says
   * (the BuildImages step: core/pipeline.ts `isCurrent`). Asked right before a build is started or the
   * task is ended with images already built: false → `Superseded`, nothing started. A runtime that sees
   * every generation itself (local: its own fence) may go without it.
   */
  current?: () => Promise<boolean>;
}

export interface DeployOptions {
  /** A whole-environment deploy: remove apps no longer declared. */
  prune?: boolean;
  /** An app redeploy in `restart` mode: same image, new processes (and the current secret bundle). */
  restart?: boolean;
  /**
   * Every app the environment declares: the names env values may reference as `${apps.<name>.url}` and
   * `${apps.<name>.internalUrl}` (see app-refs.ts); the runtime resolves them before it starts an app and
   * fails with `DeployFailed` naming an unknown one. Default: the apps launched.
   */
  apps?: string[];
  /**
   * Who may open the apps and when they sleep (core/access.ts): locally the runtime's own front door
   * before the apps; on EKS the Ingress's external auth and KEDA's scaler. Absent: no door, the apps
   * answer on their own ports.
   */
  frontDoor?: FrontDoorSettings;
  /**
   * The environment's services (preview.yaml `services:`): created on the first deploy that names them and
   * kept across redeploys, seeded once when created empty; every app's `migrate` runs before its new commit
   * starts. Env values reference them as `${services.<name>.url}` (see app-refs.ts). Absent: none.
   */
  services?: ServiceLaunch[];
}

/** An environment's access and sleep, as its application sets them (core/access.ts). */
export interface FrontDoorSettings {
  access: 'protected' | 'public';
  /** Idle time before the environment's apps are stopped; 0 = never. */
  sleepAfterMs: number;
  /** Whose access key signs the environment's links (absent: no key, nobody gets into a protected one). */
  applicationId?: string;
}

/** Whose output a log read is after: the app's running process(es), or its latest image or local build. */
export type LogSource = 'app' | 'build';

/** What a log read asks for. */
export interface LogQuery {
  source: LogSource;
  /** At most this many lines, the last ones. */
  tailLines: number;
  /** At most about this many bytes of output, the last ones (the caller cuts exactly). */
  maxBytes: number;
}

/** Output a runtime read: the last lines, and whether anything before them was left out. */
export interface LogText {
  text: string;
  /** Output before `text` exists but was not read (by `tailLines` or `maxBytes`). */
  truncated: boolean;
}

/** Which environment's output to read: no generation, a read fences nothing. */
export type LogTarget = Pick<RuntimeTarget, 'orgId' | 'envKey' | 'repoFullName' | 'prNumber'>;

/** Which environment a front-door call is about: no generation, it changes no deploy. */
export type DoorTarget = Pick<RuntimeTarget, 'orgId' | 'envKey'>;

/**
 * Building images: an environment's apps built at a commit (or what an earlier build of the same inputs
 * made, reused). The BuildImages step calls it (registry `imageBuilder`). On AWS, CodeBuild and ECR
 * (codebuild/images.ts); locally, each app's `build` command in a working copy.
 */
export interface ImageBuilder {
  /**
   * Start building `apps` at `sha` and return. Completes `token` with `{}` once every app is built, or
   * fails it with `DeployFailed` naming the app and the cause (`Superseded` when a newer build of the same
   * app or a teardown replaced it). The output may carry `{ images: { app: reference } }`, and carries
   * `{ builds: { app: BuildResult } }`: which apps were built and which reused.
   */
  build(
    target: RuntimeTarget,
    sha: string,
    apps: Record<string, AppSpec>,
    token: string,
    opts?: BuildOptions,
  ): Promise<void>;
}

/**
 * Running apps: a whole environment deployed, one app rebuilt or restarted, and the wait until every app
 * answers. The DeployApps step calls it (registry `appRunner`). On AWS, Deployments on the EKS cluster
 * and the rollout watcher (eks/apps.ts, eks/rollout-watch.ts); locally, processes.
 */
export interface AppRunner {
  /**
   * Replace the running instances of `apps` with their latest builds, started with `vars`; siblings not
   * listed are untouched unless `prune` (a whole-environment deploy) removes apps no longer declared.
   * Returns once applied; readiness is `awaitReady`'s.
   */
  deploy(target: RuntimeTarget, apps: AppLaunch[], opts?: DeployOptions): Promise<void>;
  /**
   * The environment's services as they stand once a deploy has applied (the status answer's `services`):
   * on EKS `creating` until CloudNativePG has the Cluster healthy, or Redis is rolled out, and its seed
   * ran. Absent (local): the deploy waits for its services, they are `ready` when it returns.
   */
  serviceStates?(target: RuntimeTarget): Promise<Record<string, ServiceState['status']>>;
  /**
   * Complete `token` with `{ urls }` (app name → URL) once every named app answers its readiness check,
   * or fail it with `DeployFailed` naming the app and what it answered.
   */
  awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string): Promise<void>;
}

/**
 * Stopping and removing: a failed environment's apps stopped, an environment torn down (which fences the
 * generations before it), and the fences teardowns leave pruned once nothing needs them. MarkFailed
 * (`stopApps`), TearDown (`teardown`) and the expiry sweep (`pruneFences`) call it (registry
 * `appTeardown`). On AWS, the namespace and its fence on the EKS cluster (eks/teardown.ts).
 */
export interface AppTeardown {
  /**
   * Stop every app of the environment that still runs, and its builds in progress, keeping what a new
   * start needs (builds, images, objects): what a failed environment does (MarkFailed), so nothing of it
   * keeps running. Returns why each app is not running now, for every app that was started: one that
   * ended by itself says how (`exited (exit code 1) before it was ready: <cause>`), one stopped here
   * `stopped: <reason>`. An older generation than the newest seen is refused with `Superseded`.
   */
  stopApps(target: RuntimeTarget, reason: string): Promise<Record<string, string>>;
  /**
   * The services of the environment that failed themselves (a database that won't come up, a seed that
   * failed), which MarkFailed reports `failed` rather than `stopped`. Absent (local): a service that fails
   * fails the deploy step itself, and its state is `stopped` with the environment.
   */
  failedServices?(target: RuntimeTarget): Promise<string[]>;
  /** Stop every app and build of the environment and remove what it ran from (fences older generations). */
  teardown(target: RuntimeTarget): Promise<void>;
  /**
   * Remove what teardowns left behind to fence older generations, where nothing needs it any more: the
   * fences written before `before` (a cutoff past which no call of a generation they fence can arrive)
   * whose environment is gone. A fence that still guards something stays. Says how many went. A runtime
   * whose fences cost nothing to keep (local: a number per environment in its state) removes none.
   */
  pruneFences(before: Date): Promise<{ removed: number }>;
}

/**
 * Reading output: the end of an app's or its latest build's. The app-logs route calls it (registry
 * `appLogReader`). On AWS, pods' logs from the cluster (eks/logs.ts) and build logs from CloudWatch Logs
 * (codebuild/build-logs.ts); locally, the log files the runtime writes.
 */
export interface AppLogs {
  /**
   * The end of an app's output (`source: 'app'`: its processes, locally the last 5 with a start header
   * before each; or its pods) or of its builds' (`'build'`: locally the last 3, oldest first; on AWS the
   * latest), undefined when there is none (never built, never started, removed). Secret values the
   * runtime knows the app ran with are masked; the caller masks the bundle too and caps the size.
   */
  logs(target: LogTarget, app: string, query: LogQuery): Promise<LogText | undefined>;
}

/**
 * The front door of a runtime that keeps one before the apps (local: access cookie, sleep and wake), as
 * the service itself passes it: a test run wakes its preview first and calls its apps directly. The run
 * executor calls it (registry `frontDoor`). On AWS the runtime keeps no door of its own: KEDA's HTTP
 * add-on wakes an app on the request itself, and the service reaches apps at their public URLs; its
 * `frontDoor` only resolves `wake` at once.
 */
export interface FrontDoor {
  /** Wake a sleeping environment and resolve once its apps answer; at once when it is awake. */
  wake(target: DoorTarget): Promise<void>;
  /**
   * Where the service's own calls reach each app of the environment (factory calls): locally the app's
   * own port on 127.0.0.1, behind no front door (a protected app's public URL is a `*.localhost` name
   * Node's resolver does not know, and its door wants a cookie). Counts as a request (the idle time
   * restarts). Absent: the service reaches apps at their public URLs.
   */
  serviceUrls?(target: DoorTarget): Promise<Record<string, string>>;
}

/**
 * Every role of the runtime: what an adapter family implements whole and the registry's `runtime` gives
 * the local host and the CLI. The front door only where the runtime keeps one (`FrontDoor`).
 */
export interface Runtime extends ImageBuilder, AppRunner, AppTeardown, AppLogs, Partial<FrontDoor> {}
