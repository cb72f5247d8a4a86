/**
 * Ports: the interfaces behind which every cloud-only dependency sits. Each has a cloud adapter
 * (functions/adapters/aws) and a local adapter (functions/adapters/local) implementing the same contract.
 * DynamoDB is not a port: the same repository code runs against DynamoDB and dynalite.
 */

/** Identifies one secret bundle: one per (application, app). */
export interface BundleRef {
  applicationId: string;
  app: string;
}

/**
 * Secret-bundle values. One secret per bundle holding a JSON object of env vars. There is no compare-and-set:
 * callers serialize writers to one bundle (see core/secrets.ts) and always write the whole bundle.
 */
export interface SecretStore {
  /** The bundle's values, or undefined when it was never written. */
  read(ref: BundleRef): Promise<Record<string, string> | undefined>;
  /** Create or replace the whole bundle. */
  write(ref: BundleRef, values: Record<string, string>): Promise<void>;
}

export type WorkflowName = 'deploy' | 'teardown' | 'redeployApp';

/** Starts state machine executions (Step Functions in AWS, aws-local-stepfunctions locally). */
export interface Workflows {
  /**
   * Start an execution and return without waiting for it. `name` is unique per execution and makes a
   * retried start idempotent in Step Functions.
   */
  start(
    workflow: WorkflowName,
    input: Record<string, unknown>,
    name: string,
  ): Promise<{ executionId: string }>;
  /**
   * Complete a task waiting on a callback (a `.waitForTaskToken` state): success with its output, or
   * failure with an error name the state machine's Retry/Catch match on and a human-readable cause.
   * A token whose task already ended (timed out, aborted, completed) is ignored.
   */
  completeTask(token: string, outcome: TaskOutcome): Promise<void>;
}

export type TaskOutcome =
  | { ok: true; output: Record<string, unknown> }
  | { ok: false; error: string; cause: string };

export type RefResolution =
  | { kind: 'found'; sha: string }
  | { kind: 'repository-not-found' }
  | { kind: 'ref-not-found' };

/** The source-hosting platform (a GitHub App in AWS, git repositories on disk locally). */
export interface SourceHost {
  /** The active installation that grants access to the repository, if any. */
  installation(repoFullName: string): Promise<{ installationId: string } | undefined>;
  /** The commit a branch points at. */
  resolveBranch(repoFullName: string, branch: string): Promise<RefResolution>;
  /** Whether the repository has this commit. */
  hasCommit(repoFullName: string, sha: string): Promise<boolean>;
  /** A file's text at a commit, or undefined when the commit has no such file. */
  readFile(repoFullName: string, sha: string, path: string): Promise<string | undefined>;
  /** Materialize the tree of a commit into an empty directory. */
  checkout(repoFullName: string, sha: string, dir: string): Promise<void>;
}

/** One app of a preview environment, as `preview.yaml` declares it. */
export interface AppSpec {
  port: number;
  command?: string;
  build?: string;
  health?: string;
  env?: Record<string, string>;
  dockerfile?: string;
  context?: string;
}

/**
 * The environment a runtime call acts for, with the generation of the request behind it. Runtimes fence
 * by generation: once they have seen generation N for an environment, a call for an older one is refused
 * with an error named `Superseded` and changes nothing.
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
}

/**
 * Where preview apps are built and run: processes on this machine locally, images and pods on EKS in AWS.
 * Long waits (builds, rollouts) complete through `Workflows.completeTask` with the token they were given,
 * so a state machine waits on a callback instead of polling.
 */
export interface Runtime {
  /**
   * Start building `apps` at `sha` and return. Completes `token` with `{}` once every app is built, or
   * fails it (`BuildFailed`, naming the app and the cause). A newer build of the same app replaces this one.
   */
  build(target: RuntimeTarget, sha: string, apps: Record<string, AppSpec>, token: string): Promise<void>;
  /**
   * Replace the running instances of `apps` with their latest builds, started with `vars`; siblings not
   * listed are untouched unless `prune` (a whole-environment deploy) removes apps no longer declared.
   * Returns once applied; readiness is `awaitReady`'s.
   */
  deploy(target: RuntimeTarget, apps: AppLaunch[], opts?: { prune?: boolean }): Promise<void>;
  /**
   * Complete `token` with `{ urls }` (app name → URL) once every named app answers its readiness check,
   * or fail it (`NotReady`, naming the app and what it answered).
   */
  awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string): Promise<void>;
  /** Stop every app and build of the environment and remove what it ran from (fences older generations). */
  teardown(target: RuntimeTarget): Promise<void>;
}
