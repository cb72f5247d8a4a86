import type { Octokit } from '@octokit/core';
import type { PullRequestRange } from './port.js';

/*
 * The files a pull request changes, on GitHub (the SourceHost port's `changedFiles`, used by the
 * GitHub App adapter): `GET /repos/{o}/{r}/pulls/{n}/files?per_page=100&page=N` as the installation
 * (the App needs Pull requests: read), page after page while the `Link` header names a next one. GitHub
 * lists at most 3,000 files: a listing that reaches that many cannot say that no other file changed, so
 * it answers undefined (the paths rule then does not skip the pull request).
 */

/** GitHub's cap on a pull request's file listing (30 pages of 100). */
export const MAX_PULL_FILES = 3_000;
const PER_PAGE = 100;

/** What the adapter lends this module: its installation client and its one-call error mapping. */
export interface RepoCalls {
  /** An Octokit authenticated as the installation covering the repository; undefined without one. */
  client(
    repoFullName: string,
  ): Promise<{ octokit: Pick<Octokit, 'request'>; where: { owner: string; repo: string } } | undefined>;
  /** One GitHub call with the adapter's retries; a 404 is `{found: false}`. */
  call<T>(what: string, fn: () => Promise<T>): Promise<{ found: true; value: T } | { found: false }>;
}

/** The paths a pull request changes (a rename: both names), or undefined when GitHub cannot say. */
export async function pullRequestFiles(
  calls: RepoCalls,
  repoFullName: string,
  pr: PullRequestRange,
): Promise<string[] | undefined> {
  if (!Number.isInteger(pr.number) || pr.number < 1) return undefined;
  const c = await calls.client(repoFullName);
  if (!c) return undefined;
  const files: string[] = [];
  let listed = 0;
  for (let page = 1; ; page++) {
    const r = await calls.call(`listing the files of pull request #${pr.number} of ${repoFullName}`, () =>
      c.octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/files', {
        ...c.where,
        pull_number: pr.number,
        per_page: PER_PAGE,
        page,
      }),
    );
    if (!r.found) return undefined;
    for (const f of r.value.data) {
      files.push(f.filename);
      if (f.previous_filename) files.push(f.previous_filename);
    }
    listed += r.value.data.length;
    // GitHub's listing ends at its cap with no next page: as many files as that may be more.
    if (listed >= MAX_PULL_FILES) return undefined;
    if (!/\brel="?next"?/.test(r.value.headers.link ?? '') || r.value.data.length === 0) return files;
  }
}
