/**
 * The SourceHost port: the source-hosting platform. Adapters: `github-app.ts` (a GitHub App, in AWS
 * mode), `local-git.ts` (git repositories on disk).
 */
import type { Readable } from 'node:stream';

/**
 * Where a branch points. `no-installation`: the source host grants this service no access to the
 * repository (no GitHub App installation covers it).
 */
export type RefResolution =
  | { kind: 'found'; sha: string }
  | { kind: 'repository-not-found' }
  | { kind: 'ref-not-found' }
  | { kind: 'no-installation' };

/** A pull request as `changedFiles` names it. */
export interface PullRequestRange {
  number: number;
  headSha: string;
  baseSha?: string;
}

/** A git object of a commit: a tree (a folder) or a blob (a file), by its object id. */
export interface GitObject {
  type: 'tree' | 'blob';
  id: string;
}

export interface SourceHost {
  /** The active installation that grants access to the repository, if any. */
  installation(repoFullName: string): Promise<{ installationId: string } | undefined>;
  /** The commit a branch points at. */
  resolveBranch(repoFullName: string, branch: string): Promise<RefResolution>;
  /**
   * The commit a pull request's head points at now, or undefined when there is no such pull request (or
   * no access). What breaks a tie between two updates of a pull request stamped the same second
   * (core/source-order.ts). GitHub: the pull request's `head.sha`. A source host without pull requests
   * (local git) answers the head of `headRef`, the branch the pull request's events name, in the repository.
   */
  pullRequestHead(repoFullName: string, pr: { number: number; headRef: string }): Promise<string | undefined>;
  /**
   * The paths a pull request changes (a renamed file: both its names), or undefined when the source host
   * cannot say (no such pull request, no access; a GitHub listing cut at its 3,000 files). What an
   * application's `paths` rule is checked against (core/preview-rules.ts). GitHub: the pull request's
   * files (`pull-request-files.ts`). A source host without pull requests (local git): the diff from the
   * merge base of `baseSha` and `headSha` to `headSha`, undefined without `baseSha`.
   */
  changedFiles(repoFullName: string, pr: PullRequestRange): Promise<string[] | undefined>;
  /** Whether the repository has this commit. */
  hasCommit(repoFullName: string, sha: string): Promise<boolean>;
  /** A file's text at a commit, or undefined when the commit has no such file. */
  readFile(repoFullName: string, sha: string, path: string): Promise<string | undefined>;
  /**
   * The git object at `path` (`.` or `` the root) of a commit, or undefined when there is none: what an
   * app's build identity hashes (the tree of its build context). GitHub: the git data API; local: `git
   * rev-parse <sha>:<path>` (git-objects.ts).
   */
  objectId(repoFullName: string, sha: string, path: string): Promise<GitObject | undefined>;
  /**
   * Materialize the tree of a commit into an empty directory. `signal` cancels it: the promise settles
   * only once nothing writes into `dir` any more (so a caller may then remove it).
   */
  checkout(repoFullName: string, sha: string, dir: string, opts?: { signal?: AbortSignal }): Promise<void>;
  /**
   * The tree of a commit as a gzipped tarball, streamed (what image builds start from). Every file sits
   * under one top-level folder, as in GitHub's tarballs.
   */
  archive(repoFullName: string, sha: string): Promise<Readable>;
}

/**
 * One attempt at delivering a webhook, as the source host records it (GitHub: `GET /app/hook/deliveries`).
 * A redelivery is a new attempt with its own `id` and the same `guid` (the `X-GitHub-Delivery` header).
 */
export interface HookDelivery {
  /** The attempt's id (what a redelivery request names). */
  id: number;
  /** The delivery's GUID, shared by all its attempts. */
  guid: string;
  /** When this attempt was made (ISO 8601). */
  deliveredAt: string;
  /** Whether this attempt is a redelivery. */
  redelivery: boolean;
  /** The HTTP status the receiver answered (0 or absent when it did not answer: a timeout, say). */
  statusCode: number;
  event: string;
  action?: string;
}

/**
 * The webhook deliveries of the source host's app, for the schedule that asks for failed ones again
 * (core/webhook-redelivery.ts). Adapters: `github-app.ts` (`GitHubAppWebhookDeliveries`, as the App),
 * `local-deliveries.ts` (none: locally nothing delivers webhooks from outside).
 */
export interface WebhookDeliveries {
  /**
   * The attempts made since `since`, newest first (an adapter may yield a few older ones: the page that
   * crosses `since` is read whole).
   */
  recent(since: Date): AsyncIterable<HookDelivery>;
  /** Ask the source host to make a new attempt at this one's delivery (same GUID). */
  redeliver(id: number): Promise<void>;
}
