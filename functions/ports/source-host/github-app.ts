import { spawn } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { NotFoundError } from '../../shared/errors.js';
import { TransientError } from '../../shared/step-errors.js';
import { type AppClient, type GitHubAppCredentials, githubAppGetter } from './github-app-secret.js';
import { GitHubCalls } from './github-calls.js';
import { appWebhookDeliveries } from './github-deliveries.js';
import type { RefResolution, SourceHost, WebhookDeliveries } from './port.js';

/*
 * The GitHub App source host (AWS mode): the REST API at a configurable base URL (GitHub Enterprise
 * Server, tests), authenticated as a GitHub App whose credentials live in one Secrets Manager secret.
 *
 * GitHub calls, per operation (`{o}/{r}` the repository; the first two only when not cached):
 *   installation   GET  /repos/{o}/{r}/installation                       (App JWT; cached 5 min per repo)
 *   (token)        POST /app/installations/{id}/access_tokens             (App JWT; cached until 5 min
 *                                                                           before its expires_at)
 *   resolveBranch  GET  /repos/{o}/{r}/git/ref/heads/{branch}, and on 404: GET /repos/{o}/{r}
 *   pullRequestHead GET /repos/{o}/{r}/pulls/{n}             → head.sha (the App needs Pull requests: read)
 *   hasCommit      GET  /repos/{o}/{r}/commits/{sha}        Accept: application/vnd.github.sha
 *   readFile       GET  /repos/{o}/{r}/contents/{path}?ref={sha}   Accept: application/vnd.github.raw+json
 *   archive        GET  /repos/{o}/{r}/tarball/{sha} → 302 → the gzipped tarball, streamed
 *   checkout       archive, extracted with `tar -xz --strip-components=1`
 * and, for the App's webhook deliveries (`webhookDeliveries()`, the WebhookDeliveries port):
 *   recent         GET  /app/hook/deliveries?per_page=100[&cursor=…]   (App JWT; newest first, the next
 *                                                                           page's cursor in the Link header)
 *   redeliver      POST /app/hook/deliveries/{id}/attempts              (App JWT; 202)
 *                  (github-deliveries.ts)
 * Every repository operation first looks up the installation (no installation → the port's
 * "not accessible" outcome) and makes sure the installation token is fresh.
 *
 * Failures map in one place (`GitHubCalls.call`, github-calls.ts): 404 (and the statuses an operation names) → the port's not-found
 * outcomes; 5xx, network errors and rate limits (403/429 with `retry-after`, or `x-ratelimit-remaining: 0`
 * with `x-ratelimit-reset`) → retried with backoff honouring those headers, up to `maxAttempts` and never
 * sleeping longer than `maxWaitMs` at once, then a TransientError (the state machine retries it later);
 * 401 on an App JWT → a ServiceUnavailableError naming the secret to fix. Octokit here is @octokit/core
 * without the retry and throttling plugins, so retries are only these. The private key is never logged or
 * quoted in an error. The secret and the App client built from it: github-app-secret.ts.
 */

export interface GitHubAppSourceHostOptions {
  credentials: Pick<GitHubAppCredentials, 'get' | 'secretArn'>;
  /** The REST API base URL (`https://api.github.com`, `https://ghe.example.com/api/v3`). */
  apiUrl: string;
  /** The clock, in ms (tests move it to expire tokens and cached installations). */
  now?: () => number;
  /** Sleeps between retries (tests record them instead). */
  sleep?: (ms: number) => Promise<void>;
  /** Attempts per call, the first included (default 4: three retries). */
  maxAttempts?: number;
  /** The longest single wait before a retry; a rate limit asking for more gives up at once (default 10 s). */
  maxWaitMs?: number;
  /** How long a found installation is remembered per repository (default 5 min). */
  installationTtlMs?: number;
  /** An installation token is replaced this long before its `expires_at` (default 5 min). */
  tokenRefreshMarginMs?: number;
}

type Repo = { owner: string; repo: string };
type Client = AppClient['octokit'];

const REPO_RE = /^([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))\/([A-Za-z0-9._-]{1,100})$/;
const SHA_RE = /^[0-9a-f]{7,40}$/i;
const MINUTE = 60_000;

function parseRepo(fullName: string): Repo | undefined {
  const m = REPO_RE.exec(fullName);
  if (!m || m[2] === '.' || m[2] === '..') return undefined;
  return { owner: m[1]!, repo: m[2]! };
}

/** A repository path as URL path segments, or undefined when it is not a plain relative path. */
function encodePath(path: string): string | undefined {
  const segments = path.replace(/^\.?\/+/, '').split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) return undefined;
  return segments.map(encodeURIComponent).join('/');
}

/** The SourceHost port on GitHub, through a GitHub App (see the file comment for the calls it makes). */
export class GitHubAppSourceHost implements SourceHost {
  private readonly now: () => number;
  private readonly installationTtlMs: number;
  private readonly tokenRefreshMarginMs: number;
  /** The App (and its Octokit), built once from the secret; a failed build is retried on the next call. */
  private readonly app: () => Promise<AppClient>;
  private readonly installations = new Map<string, { id: string; until: number }>();
  private readonly clients = new Map<string, Promise<Client>>();
  /** Installations whose token GitHub rejected: the next call mints a new one. */
  private readonly staleTokens = new Set<string>();
  /** The token last seen per installation (one not seen before was just minted: it is used as it is). */
  private readonly seenTokens = new Map<string, string>();
  /** Every GitHub call goes through it: retries and the error mapping. */
  private readonly github: GitHubCalls;

  constructor(opts: GitHubAppSourceHostOptions) {
    this.now = opts.now ?? Date.now;
    this.installationTtlMs = opts.installationTtlMs ?? 5 * MINUTE;
    this.tokenRefreshMarginMs = opts.tokenRefreshMarginMs ?? 5 * MINUTE;
    this.app = githubAppGetter(opts.credentials, opts.apiUrl);
    this.github = new GitHubCalls({
      now: this.now,
      sleep: opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
      maxAttempts: opts.maxAttempts ?? 4,
      maxWaitMs: opts.maxWaitMs ?? 10_000,
      secretArn: () => opts.credentials.secretArn,
      onTokenRejected: () => {
        for (const id of this.clients.keys()) this.staleTokens.add(id);
      },
    });
  }

  async installation(repoFullName: string): Promise<{ installationId: string } | undefined> {
    const where = parseRepo(repoFullName);
    if (!where) return undefined;
    const key = repoFullName.toLowerCase();
    const hit = this.installations.get(key);
    if (hit && hit.until > this.now()) return { installationId: hit.id };
    const app = await this.app();
    const r = await this.github.call(
      `installation lookup for ${repoFullName}`,
      () => app.octokit.request('GET /repos/{owner}/{repo}/installation', where),
      [404],
      'app',
    );
    if (!r.found) {
      // Not remembered: an App installed a minute ago must work now.
      this.installations.delete(key);
      return undefined;
    }
    const id = String(r.value.data.id);
    this.installations.set(key, { id, until: this.now() + this.installationTtlMs });
    return { installationId: id };
  }

  async resolveBranch(repoFullName: string, branch: string): Promise<RefResolution> {
    if (!parseRepo(repoFullName)) return { kind: 'repository-not-found' };
    const c = await this.repoClient(repoFullName);
    if (!c) return { kind: 'no-installation' };
    const ref = encodePath(branch);
    if (ref) {
      // 409: the repository is empty.
      const r = await this.github.call(
        `resolving branch ${branch} of ${repoFullName}`,
        () => c.octokit.request(`GET /repos/{owner}/{repo}/git/ref/heads/${ref}`, c.where),
        [404, 409],
      );
      const object = r.found
        ? (r.value.data as { object?: { sha?: string; type?: string } }).object
        : undefined;
      if (object?.type === 'commit' && object.sha) return { kind: 'found', sha: object.sha };
    }
    const repo = await this.github.call(`reading repository ${repoFullName}`, () =>
      c.octokit.request('GET /repos/{owner}/{repo}', c.where),
    );
    return repo.found ? { kind: 'ref-not-found' } : { kind: 'repository-not-found' };
  }

  async pullRequestHead(
    repoFullName: string,
    pr: { number: number; headRef: string },
  ): Promise<string | undefined> {
    if (!Number.isInteger(pr.number) || pr.number < 1) return undefined;
    const c = await this.repoClient(repoFullName);
    if (!c) return undefined;
    const r = await this.github.call(`reading pull request #${pr.number} of ${repoFullName}`, () =>
      c.octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', {
        ...c.where,
        pull_number: pr.number,
      }),
    );
    return r.found ? r.value.data.head.sha.toLowerCase() : undefined;
  }

  async hasCommit(repoFullName: string, sha: string): Promise<boolean> {
    if (!SHA_RE.test(sha)) return false;
    const c = await this.repoClient(repoFullName);
    if (!c) return false;
    // 422: "No commit found for SHA".
    const r = await this.github.call(
      `looking up commit ${sha} in ${repoFullName}`,
      () =>
        c.octokit.request('GET /repos/{owner}/{repo}/commits/{ref}', {
          ...c.where,
          ref: sha,
          headers: { accept: 'application/vnd.github.sha' },
        }),
      [404, 422],
    );
    return r.found;
  }

  async readFile(repoFullName: string, sha: string, path: string): Promise<string | undefined> {
    const encoded = encodePath(path);
    if (!SHA_RE.test(sha) || !encoded) return undefined;
    const c = await this.repoClient(repoFullName);
    if (!c) return undefined;
    const r = await this.github.call(
      `reading ${path} at ${sha} in ${repoFullName}`,
      () =>
        c.octokit.request(`GET /repos/{owner}/{repo}/contents/${encoded}`, {
          ...c.where,
          ref: sha,
          headers: { accept: 'application/vnd.github.raw+json' },
          request: { parseSuccessResponseBody: false },
        }),
      [404, 422],
    );
    if (!r.found) return undefined;
    const body = r.value.data as WebReadableStream | null;
    // A directory answers its listing as JSON, whatever the Accept header: not a file.
    if (/^application\/json\b/.test(r.value.headers['content-type'] ?? '')) {
      await body?.cancel();
      return undefined;
    }
    return body ? new Response(body as ReadableStream).text() : '';
  }

  async archive(repoFullName: string, sha: string): Promise<Readable> {
    const missing = () => new NotFoundError(`commit ${sha} not found in ${repoFullName}`);
    if (!SHA_RE.test(sha)) throw missing();
    const c = await this.repoClient(repoFullName);
    if (!c) {
      throw new NotFoundError(
        `repository ${repoFullName} not found, or no installation of the GitHub App covers it`,
      );
    }
    // GitHub answers 302 to a short-lived URL (codeload); fetch follows it. The body is not buffered.
    const r = await this.github.call(`downloading the tarball of ${sha} in ${repoFullName}`, () =>
      c.octokit.request('GET /repos/{owner}/{repo}/tarball/{ref}', {
        ...c.where,
        ref: sha,
        request: { parseSuccessResponseBody: false },
      }),
    );
    if (!r.found) throw missing();
    const body = r.value.data as unknown as WebReadableStream | null;
    if (!body) throw new TransientError(`GitHub sent an empty tarball for ${sha} in ${repoFullName}`);
    return Readable.fromWeb(body);
  }

  /** The archive extracted into `dir` (created if needed). `signal` cancels the download and `tar`. */
  async checkout(
    repoFullName: string,
    sha: string,
    dir: string,
    opts: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const tarball = await this.archive(repoFullName, sha);
    await mkdir(dir, { recursive: true });
    const tar = spawn('tar', ['-xz', '--strip-components=1', '-C', dir], {
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    tar.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
    });
    const kill = () => tar.kill('SIGKILL');
    opts.signal?.addEventListener('abort', kill, { once: true });
    const exited = new Promise<number | null>((resolve, reject) => {
      tar.once('error', (err) => {
        tarball.destroy();
        reject(new Error(`tar could not be started (${(err as NodeJS.ErrnoException).code ?? err.message})`));
      });
      tar.once('close', resolve);
    });
    const piped = pipeline(tarball, tar.stdin, { signal: opts.signal }).then(
      () => undefined,
      (err: Error) => err,
    );
    try {
      const [code, pipeError] = await Promise.all([exited, piped]);
      if (opts.signal?.aborted) throw Object.assign(new Error('checkout cancelled'), { name: 'AbortError' });
      if (code === 0 && !pipeError) return;
      // A failed download explains a failed extraction better than tar's "unexpected EOF"; EPIPE only
      // says that tar stopped reading.
      if (pipeError && !/EPIPE/.test(pipeError.message)) throw pipeError;
      const last = stderr.trim().split('\n').pop() || `exit code ${code}`;
      throw new Error(
        `extracting the tarball of ${sha} in ${repoFullName} failed: ${last.split(dir).join('the working copy')}`,
      );
    } finally {
      opts.signal?.removeEventListener('abort', kill);
    }
  }

  /**
   * The App's webhook deliveries (the WebhookDeliveries port), as the App, with this adapter's retries and
   * error mapping. A 404 on the listing (the App has no webhook) lists nothing.
   */
  webhookDeliveries(): WebhookDeliveries {
    return appWebhookDeliveries(this.app, this.github);
  }

  /**
   * An Octokit authenticated as the installation covering the repository, with a token valid for at
   * least `tokenRefreshMarginMs`; undefined when no installation covers it (any more).
   */
  private async repoClient(repoFullName: string): Promise<{ octokit: Client; where: Repo } | undefined> {
    const where = parseRepo(repoFullName);
    const installation = where && (await this.installation(repoFullName));
    if (!where || !installation) return undefined;
    const id = installation.installationId;
    let client = this.clients.get(id);
    if (!client) {
      client = this.app().then((app) => app.getInstallationOctokit(Number(id)));
      this.clients.set(id, client);
      client.catch(() => this.clients.delete(id));
    }
    const octokit = await client;
    // @octokit/auth-app caches tokens for 59 minutes from when it got them; replace them ourselves
    // `tokenRefreshMarginMs` before the expiry GitHub states.
    type Token = { token: string; expiresAt: string };
    const token = await this.github.call(
      `minting an installation token for ${repoFullName}`,
      async () => {
        let auth = (await octokit.auth({ type: 'installation' })) as Token;
        const seen = this.seenTokens.get(id) === auth.token;
        const expiring = Date.parse(auth.expiresAt) - this.tokenRefreshMarginMs <= this.now();
        if (seen && (this.staleTokens.has(id) || expiring)) {
          auth = (await octokit.auth({ type: 'installation', refresh: true })) as Token;
        }
        this.staleTokens.delete(id);
        this.seenTokens.set(id, auth.token);
      },
      [404],
      'app',
    );
    if (!token.found) {
      // The installation was removed since it was looked up.
      this.installations.delete(repoFullName.toLowerCase());
      return undefined;
    }
    return { octokit, where };
  }
}
