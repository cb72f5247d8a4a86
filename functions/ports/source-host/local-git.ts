import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { RefResolution, SourceHost } from './port.js';

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

  async checkout(repoFullName: string, sha: string, target: string): Promise<void> {
    const dir = this.dir(repoFullName);
    if (!dir || !SHA_RE.test(sha)) throw new Error(`commit ${sha} not found in ${repoFullName}`);
    await run('git', ['clone', '--quiet', '--no-checkout', dir, target]);
    await run('git', ['-C', target, 'checkout', '--quiet', '--detach', sha]);
  }
}
