/**
 * The SourceHost port: the source-hosting platform. Adapters: `local-git.ts` (git repositories on disk);
 * the GitHub App adapter is the seam for AWS mode.
 */

export type RefResolution =
  | { kind: 'found'; sha: string }
  | { kind: 'repository-not-found' }
  | { kind: 'ref-not-found' };

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
