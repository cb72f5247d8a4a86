import {
  type AppClient,
  type GitHubAppCredentials,
  githubAppGetter,
} from '../source-host/github-app-secret.js';
import {
  createCheckRun,
  findCheckRun,
  type GitHubRest,
  publishToGitHub,
  type RestResponse,
  replyComment,
  updateCheckRun,
} from './github-rest.js';
import type { CheckRunLookup, CheckRunWrite, PrReport, PrStatus, PublishOutcome } from './port.js';

/*
 * PR status on GitHub (AWS mode), as the GitHub App's installation on the repository: the calls of
 * `publishToGitHub`, plus (App JWT) `GET /repos/{o}/{r}/installation`, remembered 5 minutes per repository.
 * The App needs Deployments (write), Pull requests (write) and Checks (write, the merge gate) besides the source host's read access. No
 * retries here: a status is reported again at the environment's next change, and a failed report never
 * fails the step that made it (core/pr-status.ts logs it).
 */

export interface GitHubAppPrStatusOptions {
  credentials: Pick<GitHubAppCredentials, 'get'>;
  /** The REST API base URL (`https://api.github.com`, GitHub Enterprise Server's `/api/v3`). */
  apiUrl: string;
  /** Per-call timeout (default 10 s). */
  timeoutMs?: number;
  now?: () => number;
}

type Client = AppClient['octokit'];

/** Turns an Octokit into a transport: HTTP errors come back as answers. */
function transport(octokit: Client, timeoutMs: number): GitHubRest {
  return {
    async request(method, path, body): Promise<RestResponse> {
      try {
        const res = await octokit.request(`${method} ${path}`, {
          ...(body ?? {}),
          request: { signal: AbortSignal.timeout(timeoutMs) },
        });
        return { status: res.status, data: res.data };
      } catch (err) {
        // An HTTP error has a response; a network error (status 500 without one) is thrown on.
        const e = err as { status?: unknown; response?: { data?: unknown } };
        if (typeof e.status === 'number' && e.response) return { status: e.status, data: e.response.data };
        throw err;
      }
    },
  };
}

export class GitHubAppPrStatus implements PrStatus {
  private readonly app: () => Promise<AppClient>;
  private readonly installations = new Map<string, { id: number | undefined; until: number }>();
  private readonly clients = new Map<number, Promise<Client>>();

  constructor(private readonly opts: GitHubAppPrStatusOptions) {
    this.app = githubAppGetter(opts.credentials, opts.apiUrl);
  }

  async publish(report: PrReport): Promise<PublishOutcome> {
    const octokit = await this.installationClient(report.repoFullName);
    if (!octokit)
      return { published: false, reason: 'no installation of the GitHub App covers the repository' };
    return publishToGitHub(transport(octokit, this.opts.timeoutMs ?? 10_000), report);
  }

  async createCheckRun(write: CheckRunWrite): Promise<number> {
    return createCheckRun(await this.rest(write.repoFullName), write);
  }

  async findCheckRun(lookup: CheckRunLookup): Promise<number | undefined> {
    return findCheckRun(await this.rest(lookup.repoFullName), lookup);
  }

  async updateCheckRun(id: number, write: CheckRunWrite): Promise<void> {
    await updateCheckRun(await this.rest(write.repoFullName), id, write);
  }

  async reply(repoFullName: string, prNumber: number, body: string): Promise<void> {
    await replyComment(await this.rest(repoFullName), repoFullName, prNumber, body);
  }

  private async rest(repoFullName: string): Promise<GitHubRest> {
    const octokit = await this.installationClient(repoFullName);
    if (!octokit) throw new Error('no installation of the GitHub App covers the repository');
    return transport(octokit, this.opts.timeoutMs ?? 10_000);
  }

  private async installationClient(repoFullName: string): Promise<Client | undefined> {
    const now = (this.opts.now ?? Date.now)();
    const key = repoFullName.toLowerCase();
    let hit = this.installations.get(key);
    if (!hit || hit.until <= now) {
      const app = await this.app();
      const [owner, repo] = repoFullName.split('/');
      let id: number | undefined;
      try {
        id = (
          await app.octokit.request('GET /repos/{owner}/{repo}/installation', { owner: owner!, repo: repo! })
        ).data.id;
      } catch (err) {
        if ((err as { status?: number }).status !== 404) throw err;
      }
      hit = { id, until: now + 5 * 60_000 };
      // Only a found installation is remembered: one installed a minute ago must work now.
      if (id !== undefined) this.installations.set(key, hit);
    }
    const id = hit.id;
    if (id === undefined) return undefined;
    let client = this.clients.get(id);
    if (!client) {
      client = this.app().then((app) => app.getInstallationOctokit(id));
      this.clients.set(id, client);
      client.catch(() => this.clients.delete(id));
    }
    return client;
  }
}
