/**
 * The PrStatus port: an environment's state where its pull request shows it. On GitHub that is a
 * Deployment per environment and commit (`transient_environment`) with its statuses, and one comment on
 * the pull request, found by a marker and updated in place. Adapters: `github-app.ts` (the REST API as the
 * GitHub App's installation, in AWS mode), `local-outbox.ts` (the same calls, appended to
 * `<dataDir>/github-outbox.jsonl` and answered from what was appended). Both run `publishToGitHub`
 * (`github-rest.ts`), so the calls are the same.
 */

/** GitHub deployment states this service reports. */
export type DeploymentState = 'in_progress' | 'success' | 'failure' | 'inactive';

/** What to show for one environment. */
export interface PrReport {
  repoFullName: string;
  /** The pull request; 0 is the main-branch environment (a deployment, no comment). */
  prNumber: number;
  /** The commit the environment deploys (the deployment's ref). */
  sha: string;
  /** The GitHub environment name (`preview/pr-7`, `preview/main`). */
  environment: string;
  state: DeploymentState;
  /** The deployment status's description (GitHub keeps 140 characters). */
  description: string;
  /** The URL GitHub links from the deployment (a successful one). */
  environmentUrl?: string;
  /**
   * Whose environment this is: a tag of the organization (a hash, never its id), in the comment's marker
   * and the deployment's payload, so two organizations previewing one repository never share either.
   */
  ownerTag: string;
  /** The comment's body (Markdown, markers added by the adapter); undefined for no comment. */
  comment?: string;
  /**
   * The report's place in the environment's history: its generation, then its last change. A report
   * older than the one the pull request shows changes nothing.
   */
  version: { generation: number; at: string };
}

export type PublishOutcome =
  | { published: true; deploymentId?: number; commentId?: number }
  | { published: false; reason: string };

/** A check run's status on GitHub (the Checks API). */
export type CheckRunStatus = 'queued' | 'in_progress' | 'completed';
export type CheckRunConclusion = 'success' | 'failure' | 'neutral' | 'cancelled';

/**
 * One write of a check run (the merge gate: core/gate/): its status and, once completed, its
 * conclusion and story. The body GitHub gets is built from it by `checkRunBody` (github-rest.ts).
 */
export interface CheckRunWrite {
  repoFullName: string;
  /** The head commit the check run is for. */
  sha: string;
  /** The check run's name (`Preview tests`). */
  name: string;
  status: CheckRunStatus;
  conclusion?: CheckRunConclusion;
  detailsUrl?: string;
  /** An id of ours the check run carries (`external_id`). */
  externalId: string;
  output: { title: string; summary: string; text?: string };
  /** Buttons shown on the check run (`requested_action` deliveries carry the identifier). */
  actions?: { label: string; description: string; identifier: string }[];
}

/** Which check run `findCheckRun` looks for: the head's, by name, carrying our `external_id`. */
export type CheckRunLookup = Pick<CheckRunWrite, 'repoFullName' | 'sha' | 'name' | 'externalId'>;

export interface PrStatus {
  publish(report: PrReport): Promise<PublishOutcome>;
  /** Create a check run (`POST /repos/{o}/{r}/check-runs`); its id. */
  createCheckRun(write: CheckRunWrite): Promise<number>;
  /**
   * The id of the head commit's check run of this name carrying `externalId`, if GitHub has one
   * (`GET /repos/{o}/{r}/commits/{sha}/check-runs?check_name=…&filter=all`): a check run created by a
   * writer that died before it could record the id, which a retry adopts instead of creating another.
   */
  findCheckRun(lookup: CheckRunLookup): Promise<number | undefined>;
  /** Update one (`PATCH /repos/{o}/{r}/check-runs/{id}`). */
  updateCheckRun(id: number, write: CheckRunWrite): Promise<void>;
  /** Reply on a pull request (`POST /repos/{o}/{r}/issues/{pr}/comments`): a refused command's why. */
  reply(repoFullName: string, prNumber: number, body: string): Promise<void>;
}
