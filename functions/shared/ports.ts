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
}

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
