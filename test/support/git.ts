import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.com', ...args], {
    cwd,
    encoding: 'utf8',
  }).trim();

/** Create `<root>/<owner>/<repo>` as a git repository with one commit of `files` on `branch`; returns its SHA. */
export function makeRepo(
  root: string,
  fullName: string,
  files: Record<string, string>,
  branch = 'main',
): string {
  const dir = join(root, ...fullName.split('/'));
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '--quiet', `--initial-branch=${branch}`);
  return commitFiles(root, fullName, files);
}

/** Commit `files` to the repository's current branch; returns the new SHA. */
export function commitFiles(root: string, fullName: string, files: Record<string, string>): string {
  const dir = join(root, ...fullName.split('/'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '--quiet', '-m', 'test commit');
  return git(dir, 'rev-parse', 'HEAD');
}

/** Point `branch` of the repository at `sha` (created, or moved there). */
export function setBranch(root: string, fullName: string, branch: string, sha: string): void {
  git(join(root, ...fullName.split('/')), 'branch', '--force', branch, sha);
}
