import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { pathSegments } from './git-objects.js';
import type { GitObject, PullRequestRange, RefResolution, SourceHost } from './port.js';

const run = promisify(execFile);
const SHA_RE = /^[0-9a-f]{7,40}$/i;

/**
 * Local source host: `owner/repo` is the git repository (bare or not) at `<gitRoot>/owner/repo`.
 * A repository that exists on disk counts as having an active installation. Uses the git CLI.
 */
export class GitSourceHost implements SourceHost {
  constructor(private readonly gitRoot: string) {}

  private dir(repoFullName: string): string | undefined {
    const dir = join(this.gitRoot, ...repoFullName.split('/'));
    return existsSync(dir) ? dir : undefined;
  }

  private async git(dir: string, args: string[]): Promise<string | undefined> {
    try {
      const { stdout } = await run('git', ['-C', dir, ...args], { maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch {
      return undefined;
    }
  }

  async installation(repoFullName: string) {
    return this.dir(repoFullName) ? { installationId: `local:${repoFullName}` } : undefined;
  }

  async resolveBranch(repoFullName: string, branch: string): Promise<RefResolution> {
    const dir = this.dir(repoFullName);
    if (!dir || (await this.git(dir, ['rev-parse', '--git-dir'])) === undefined) {
      return { kind: 'repository-not-found' };
    }
    const out = await this.git(dir, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`]);
    return out ? { kind: 'found', sha: out.trim() } : { kind: 'ref-not-found' };
  }

  /** No pull requests here: the head of the branch the events name (`headRef`). */
  async pullRequestHead(repoFullName: string, pr: { number: number; headRef: string }) {
    const ref = await this.resolveBranch(repoFullName, pr.headRef);
    return ref.kind === 'found' ? ref.sha : undefined;
  }

  /**
   * No pull requests here: what `git diff` lists from the merge base of `baseSha` and `headSha` to
   * `headSha` (GitHub's three-dot comparison), a rename as its two paths; undefined without `baseSha` or
   * when either commit is missing.
   */
  async changedFiles(repoFullName: string, pr: PullRequestRange): Promise<string[] | undefined> {
    const dir = this.dir(repoFullName);
    if (!dir || !pr.baseSha || !SHA_RE.test(pr.baseSha) || !SHA_RE.test(pr.headSha)) return undefined;
    const out = await this.git(dir, [
      'diff',
      '--name-only',
      '--no-renames',
      '-z',
      `${pr.baseSha}...${pr.headSha}`,
      '--',
    ]);
    return out === undefined ? undefined : out.split('\0').filter(Boolean);
  }

  async hasCommit(repoFullName: string, sha: string): Promise<boolean> {
    const dir = this.dir(repoFullName);
    if (!dir || !SHA_RE.test(sha)) return false;
    return (await this.git(dir, ['cat-file', '-e', `${sha}^{commit}`])) !== undefined;
  }

  async readFile(repoFullName: string, sha: string, path: string): Promise<string | undefined> {
    const dir = this.dir(repoFullName);
    if (!dir || !SHA_RE.test(sha)) return undefined;
    return this.git(dir, ['show', `${sha}:${path}`]);
  }

  /** `git rev-parse <sha>:<path>` and the object's type (`git cat-file -t`). */
  async objectId(repoFullName: string, sha: string, path: string): Promise<GitObject | undefined> {
    const dir = this.dir(repoFullName);
    const segments = pathSegments(path);
    if (!dir || !SHA_RE.test(sha) || !segments) return undefined;
    const id = (
      await this.git(dir, ['rev-parse', '--verify', '--quiet', `${sha}^{commit}:${segments.join('/')}`])
    )?.trim();
    if (!id) return undefined;
    const type = (await this.git(dir, ['cat-file', '-t', id]))?.trim();
    return type === 'tree' || type === 'blob' ? { type, id } : undefined;
  }

  /**
   * Clone the repository into `target` and check out `sha` there (detached HEAD). `signal` cancels it:
   * git and everything it started are killed, and the promise settles (rejecting with an `AbortError`)
   * only once they have all exited, so the caller can remove `target` right away. Error messages name
   * the repository, never a path on this machine (callers quote them to API clients).
   */
  async checkout(
    repoFullName: string,
    sha: string,
    target: string,
    opts: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const dir = this.dir(repoFullName);
    if (!dir || !SHA_RE.test(sha)) throw new Error(`commit ${sha} not found in ${repoFullName}`);
    const hide = (text: string) =>
      [
        [target, 'the working copy'],
        [dir, repoFullName],
        [this.gitRoot, 'the git root'],
      ].reduce((t, [path, name]) => t.split(path!).join(name!), text);
    await gitUntilExit(['clone', '--quiet', '--no-checkout', '--', dir, target], opts.signal, hide);
    await gitUntilExit(['-C', target, 'checkout', '--quiet', '--detach', sha], opts.signal, hide);
  }

  async archive(repoFullName: string, sha: string): Promise<Readable> {
    const dir = this.dir(repoFullName);
    if (!dir || !SHA_RE.test(sha) || !(await this.hasCommit(repoFullName, sha)))
      throw new Error(`commit ${sha} not found in ${repoFullName}`);
    // The same layout as GitHub's tarballs: every file under one top-level folder.
    const child = spawn(
      'git',
      ['-C', dir, 'archive', '--format=tar.gz', `--prefix=${sha.slice(0, 12)}/`, sha],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    const out = child.stdout;
    child.once('exit', (code) => {
      if (code !== 0)
        out.destroy(new Error(`git archive of ${sha} in ${repoFullName} failed (exit ${code})`));
    });
    return out;
  }
}

/**
 * Run git in its own process group and settle once it and everything it started have exited (their
 * output pipe closed). An abort kills the whole group. Rejects with the last line git printed, passed
 * through `hide`.
 */
function gitUntilExit(args: string[], signal: AbortSignal | undefined, hide: (text: string) => string) {
  return new Promise<void>((resolve, reject) => {
    const cancelled = () => Object.assign(new Error('checkout cancelled'), { name: 'AbortError' });
    if (signal?.aborted) return reject(cancelled());
    const child = spawn('git', args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4_000);
    });
    const abort = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    signal?.addEventListener('abort', abort, { once: true });
    child.once('error', (err) => {
      signal?.removeEventListener('abort', abort);
      reject(new Error(`git could not be started (${(err as NodeJS.ErrnoException).code ?? err.message})`));
    });
    child.once('close', (code, how) => {
      signal?.removeEventListener('abort', abort);
      if (signal?.aborted) return reject(cancelled());
      if (code === 0) return resolve();
      const last = stderr.trim().split('\n').pop() || (how ? `signal ${how}` : `exit code ${code}`);
      reject(new Error(`git ${args[0] === '-C' ? args[2] : args[0]} failed: ${hide(last)}`));
    });
  });
}
