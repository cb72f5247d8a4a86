/**
 * A loopback fake of the GitHub REST API, for the GitHub App source host's tests and the cloud simulation
 * tier (reached through `GITHUB_API_URL`). Test support code, not product.
 *
 * What it implements, and only that:
 * - App authentication: an RS256 JWT checked against the public key of a seeded App (`iss` = the App id,
 *   `exp` in the future and at most ~10 minutes away, `iat` not in the future). A bad signature or an unknown
 *   App → 401 `{"message":"Bad credentials"}`.
 * - `GET /repos/{o}/{r}/installation` (JWT): the App's installation covering the repository, else 404.
 * - `POST /app/installations/{id}/access_tokens` (JWT): a new token with `expires_at`
 *   (`tokenLifetimeSeconds`, one hour by default); `tokensMinted` counts them.
 * - With an installation token (`Authorization: token …`; an unknown or expired one → 401; a repository the
 *   token's installation does not cover → 404, as on GitHub):
 *   `GET /repos/{o}/{r}`; `GET /repos/{o}/{r}/git/ref/heads/{branch}` (409 on a repository without
 *   commits); `GET /repos/{o}/{r}/commits/{ref}` (`Accept: application/vnd.github.sha` → the SHA as text,
 *   else a small JSON; unknown → 422); `GET /repos/{o}/{r}/contents/{path}?ref=` (`Accept: …raw…` → the file's
 *   bytes, else JSON with base64 content; a directory → its JSON listing); `GET /repos/{o}/{r}/tarball/{ref}`
 *   → 302 to `/_codeload/{o}/{r}/legacy.tar.gz/{sha}?token=…` on this server, which serves a gzipped tar
 *   (made with `tar -cz`) whose files sit under `{o}-{r}-{sha7}/`, like GitHub's. The git data API:
 *   `GET /repos/{o}/{r}/git/commits/{sha}` → `{sha, tree: {sha}}`, `GET /repos/{o}/{r}/git/trees/{sha}` →
 *   `{sha, tree: [{path, mode, type, sha}], truncated: false}` (not recursive), with git's own object ids
 *   (git-trees.ts); `requests` shows which were asked. Refs are branch names,
 *   full SHAs or unique SHA prefixes of at least 7 characters. `GET /repos/{o}/{r}/pulls/{n}` → a pull
 *   request a test set with `setPull` (number, state, head, base, updated_at), else 404;
 *   `GET /repos/{o}/{r}/pulls/{n}/files` → the files that differ between its base commit (`baseSha`, else
 *   the default branch's head) and its head commit, by path (added, modified, removed; no rename
 *   detection), paged like GitHub (`per_page` default 30, at most 100; `page`; a `Link` header with
 *   `rel="next"` while more follow) and cut at 3,000 files as GitHub does; `filesPages` counts the pages served.
 * - The App's webhook deliveries (JWT; each App sees its own), as a test records them with
 *   `recordDelivery`: the listing and redelivery requests of github-deliveries.ts.
 * - Fault injection: `failNext(path, n, fault)` makes the next n requests to a path answer the fault
 *   (`faults.serverError`, `faults.secondaryRateLimit`, `faults.tooManyRequests`, `faults.primaryRateLimit`).
 * - `requests` records every request (method, path, query); `calls()` lists them as `METHOD /path`.
 * - The check runs: `POST /repos/{o}/{r}/check-runs`, `PATCH /repos/{o}/{r}/check-runs/{id}`, and
 *   `GET /repos/{o}/{r}/commits/{ref}/check-runs` (github-checks.ts; what was sent is in `checkRuns`).
 * - The comments of a pull request set with `setPull`: list, create, update, delete (github-comments.ts;
 *   what was sent is in `issueComments`).
 * - An optional base path (`/api/v3`, as on GitHub Enterprise Server) in front of every route.
 * What it does not: pagination (but of deliveries), permissions per endpoint, public repositories (every repository is private),
 * rate-limit headers on ordinary answers, ETags, the GraphQL API, webhooks, anything else (→ 404, recorded).
 */
import { execFileSync } from 'node:child_process';
import {
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  verify as verifySignature,
} from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type FakeTreeEntry, gitTrees } from './git-trees.js';
import { FakeCheckRuns } from './github-checks.js';
import { FakeIssueComments } from './github-comments.js';
import { type DeliveryAttempt, FakeHookDeliveries } from './github-deliveries.js';

/** An App key pair as GitHub issues it: the private key in PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`). */
export function appKeyPair(): { privateKey: string; publicKey: string } {
  return generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
}

export interface Fault {
  status: number;
  headers?: Record<string, string>;
  message?: string;
}

/** The failures GitHub answers that a client must ride out. */
export const faults = {
  serverError: (status = 502): Fault => ({ status, message: 'Server Error' }),
  secondaryRateLimit: (retryAfterSeconds = 1): Fault => ({
    status: 403,
    headers: { 'retry-after': String(retryAfterSeconds) },
    message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
  }),
  tooManyRequests: (retryAfterSeconds = 1): Fault => ({
    status: 429,
    headers: { 'retry-after': String(retryAfterSeconds) },
    message: 'Too Many Requests',
  }),
  primaryRateLimit: (resetEpochSeconds: number): Fault => ({
    status: 403,
    headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(resetEpochSeconds) },
    message: 'API rate limit exceeded for installation.',
  }),
};

export interface RecordedRequest {
  method: string;
  path: string;
  query: string;
}

interface FakeRepo {
  fullName: string;
  id: number;
  defaultBranch: string;
  branches: Map<string, string>;
  commits: Map<string, Record<string, string>>;
  pulls: Map<number, FakePull>;
}

/** A pull request as the fake holds it (what `GET /repos/{o}/{r}/pulls/{n}` answers from). */
export interface FakePull {
  headSha: string;
  headRef: string;
  /** The base commit its files are compared with (default: the default branch's head). */
  baseSha?: string;
  state?: 'open' | 'closed';
  updatedAt?: string;
}

/** An answer: status, headers, body. */
interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: JSON.stringify(body),
});
const notFound = () => json(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
const badCredentials = (message = 'Bad credentials') =>
  json(401, { message, documentation_url: 'https://docs.github.com/rest' });

export class FakeGitHub {
  url = '';
  readonly requests: RecordedRequest[] = [];
  tokensMinted = 0;
  tokenLifetimeSeconds = 3600;
  /**
   * The clock of installation tokens, in ms (tests move it with the client's). JWTs are checked against
   * the real clock, the one @octokit/auth-app signs them with.
   */
  now: () => number = Date.now;
  private server?: Server;
  private readonly apps = new Map<string, KeyObject>();
  private readonly installations = new Map<number, { appId: string; repos: Set<string> }>();
  private readonly repos = new Map<string, FakeRepo>();
  private readonly tokens = new Map<string, { installationId: number; expiresAt: number }>();
  private readonly downloads = new Map<string, { repo: string; sha: string }>();
  private readonly tarballs = new Map<string, Buffer>();
  private readonly gitTrees = new Map<string, ReturnType<typeof gitTrees>>();
  private readonly faults: { path: string | RegExp; remaining: number; fault: Fault }[] = [];
  private nextRepoId = 1000;
  /** The App's webhook deliveries (github-deliveries.ts), as a test records them. */
  readonly hookDeliveries = new FakeHookDeliveries();
  /** Pages of pull request files served (`GET …/pulls/{n}/files`). */
  filesPages = 0;
  /** The attempt ids redelivery was asked for (`POST /app/hook/deliveries/{id}/attempts`), in order. */
  get redeliveryRequests(): number[] {
    return this.hookDeliveries.redeliveryRequests;
  }
  /** The largest `per_page` the deliveries listing honours (100 on GitHub; tests lower it to page). */
  set deliveriesPageSize(size: number) {
    this.hookDeliveries.pageSize = size;
  }
  /** The check runs (github-checks.ts): created and updated with an installation token. */
  readonly checkRuns = new FakeCheckRuns(() => this.now());
  readonly issueComments = new FakeIssueComments(() => this.now());

  /** `basePath`: a prefix in front of every route (`/api/v3` on GitHub Enterprise Server). */
  constructor(private readonly basePath = '') {}

  async start(): Promise<this> {
    this.server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      let reply: Reply;
      try {
        reply = this.handle(req, Buffer.concat(chunks).toString('utf8'));
      } catch (err) {
        reply = json(500, { message: (err as Error).message });
      }
      res.writeHead(reply.status, reply.headers);
      res.end(reply.body);
    });
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', () => ok()));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}${this.basePath}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((done) => {
      this.server?.close(() => done());
      this.server?.closeAllConnections();
    });
  }

  /** Every request as `METHOD /path` (the base path and query left out). */
  calls(): string[] {
    return this.requests.map((r) => `${r.method} ${r.path}`);
  }

  addApp(appId: string, publicKeyPem: string): void {
    this.apps.set(appId, createPublicKey(publicKeyPem));
  }

  addInstallation(id: number, appId: string, repos: string[]): void {
    this.installations.set(id, { appId, repos: new Set(repos.map((r) => r.toLowerCase())) });
  }

  /** Uninstall: the installation and its tokens are gone. */
  removeInstallation(id: number): void {
    this.installations.delete(id);
    for (const [token, t] of this.tokens) if (t.installationId === id) this.tokens.delete(token);
  }

  addRepo(fullName: string, defaultBranch = 'main'): void {
    this.repos.set(fullName.toLowerCase(), {
      fullName,
      id: this.nextRepoId++,
      defaultBranch,
      branches: new Map(),
      commits: new Map(),
      pulls: new Map(),
    });
  }

  removeRepo(fullName: string): void {
    this.repos.delete(fullName.toLowerCase());
  }

  /** Add a commit holding exactly `files` (a random SHA unless given); `branch` then points at it. */
  addCommit(
    fullName: string,
    files: Record<string, string>,
    branch?: string,
    sha = randomBytes(20).toString('hex'),
  ): string {
    const repo = this.repo(fullName);
    if (!repo) throw new Error(`no repository ${fullName}`);
    repo.commits.set(sha, { ...files });
    if (branch) repo.branches.set(branch, sha);
    return sha;
  }

  /** Open (or move) pull request `number` of a repository: its head is `pull.headSha` from now on. */
  setPull(fullName: string, number: number, pull: FakePull): void {
    const repo = this.repo(fullName);
    if (!repo) throw new Error(`no repository ${fullName}`);
    repo.pulls.set(number, { ...pull });
  }

  /** Record one attempt at delivering a webhook of an App (github-deliveries.ts `record`); its id. */
  recordDelivery(appId: string, d: DeliveryAttempt): number {
    return this.hookDeliveries.record(appId, d);
  }

  /** The next `count` requests whose path is (or matches) `path` answer `fault`. */
  failNext(path: string | RegExp, count: number, fault: Fault): void {
    this.faults.push({ path, remaining: count, fault });
  }

  private repo(fullName: string): FakeRepo | undefined {
    return this.repos.get(fullName.toLowerCase());
  }

  private handle(req: IncomingMessage, body: string): Reply {
    const url = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    let path = url.pathname;
    if (this.basePath && path.startsWith(this.basePath)) path = path.slice(this.basePath.length);
    this.requests.push({ method, path, query: url.search });

    const fault = this.faults.find(
      (f) => f.remaining > 0 && (typeof f.path === 'string' ? f.path === path : f.path.test(path)),
    );
    if (fault) {
      fault.remaining--;
      return json(fault.fault.status, { message: fault.fault.message ?? 'fault' }, fault.fault.headers);
    }

    const codeload = /^\/_codeload\/([^/]+)\/([^/]+)\/legacy\.tar\.gz\/([0-9a-f]{40})$/.exec(path);
    if (method === 'GET' && codeload) return this.download(codeload, url.searchParams.get('token') ?? '');

    const mint = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path);
    if (method === 'POST' && mint) {
      const app = this.appOf(req);
      return typeof app === 'string' ? this.mintToken(app, Number(mint[1])) : app;
    }

    if (path === '/app/hook/deliveries' || /^\/app\/hook\/deliveries\/\d+\/attempts$/.test(path)) {
      const app = this.appOf(req);
      if (typeof app !== 'string') return app;
      const r = this.hookDeliveries.handle(app, method, path, url, `${this.url}/app/hook/deliveries`);
      return json(r.status, r.body, r.headers);
    }

    const repoPath = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    if (!repoPath) return notFound();
    const fullName = `${decodeURIComponent(repoPath[1]!)}/${decodeURIComponent(repoPath[2]!)}`;
    const rest = repoPath[3] ?? '';
    const checks = rest.startsWith('/check-runs') || /^\/commits\/[^/]+\/check-runs$/.test(rest);
    const comments = FakeIssueComments.routes(rest);
    if (method !== 'GET' && !checks && !comments) return notFound();

    if (rest === '/installation') {
      const app = this.appOf(req);
      if (typeof app !== 'string') return app;
      const id = this.repo(fullName) && this.installationOf(app, fullName);
      if (!id) return notFound();
      return json(200, {
        id,
        app_id: Number(app),
        account: { login: fullName.split('/')[0] },
        target_type: 'Organization',
        repository_selection: 'selected',
        permissions: { contents: 'read', metadata: 'read' },
      });
    }

    // Everything else reads the repository with an installation token.
    const auth = /^(?:token|bearer) (\S+)$/i.exec(req.headers.authorization ?? '');
    const token = auth && this.tokens.get(auth[1]!);
    if (!token || token.expiresAt <= this.now()) return badCredentials();
    const repo = this.repo(fullName);
    const covered = this.installations.get(token.installationId)?.repos.has(fullName.toLowerCase());
    if (!repo || !covered) return notFound();
    if (checks) {
      const r = this.checkRuns.handle(
        method,
        fullName,
        rest,
        body,
        (sha) => repo.commits.has(sha.toLowerCase()),
        url,
        (ref) => (repo.commits.has(ref.toLowerCase()) ? ref.toLowerCase() : repo.branches.get(ref)),
      );
      return json(r.status, r.body);
    }
    if (comments) {
      const r = this.issueComments.handle(method, fullName, rest, body, (n) => repo.pulls.has(n), url);
      return r.body === undefined ? { status: r.status } : json(r.status, r.body);
    }
    return this.readRepo(repo, rest, req.headers.accept ?? '', url);
  }

  private readRepo(repo: FakeRepo, rest: string, accept: string, url: URL): Reply {
    if (rest === '') {
      return json(200, {
        id: repo.id,
        name: repo.fullName.split('/')[1],
        full_name: repo.fullName,
        private: true,
        default_branch: repo.defaultBranch,
      });
    }
    const head = /^\/git\/ref\/heads\/(.+)$/.exec(rest);
    if (head) {
      if (repo.commits.size === 0) return json(409, { message: 'Git Repository is empty.' });
      const branch = decodeURIComponent(head[1]!);
      const sha = repo.branches.get(branch);
      if (!sha) return notFound();
      return json(200, { ref: `refs/heads/${branch}`, object: { sha, type: 'commit' } });
    }
    const files = /^\/pulls\/(\d+)\/files$/.exec(rest);
    if (files) {
      const p = repo.pulls.get(Number(files[1]));
      if (!p) return notFound();
      return this.pullFiles(repo, p, Number(files[1]), url);
    }
    const pull = /^\/pulls\/(\d+)$/.exec(rest);
    if (pull) {
      const number = Number(pull[1]);
      const p = repo.pulls.get(number);
      if (!p) return notFound();
      return json(200, {
        number,
        state: p.state ?? 'open',
        updated_at: p.updatedAt ?? new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
        head: { sha: p.headSha, ref: p.headRef, repo: { full_name: repo.fullName } },
        base: { ref: repo.defaultBranch, repo: { full_name: repo.fullName } },
      });
    }
    const commit = /^\/commits\/([^/]+)$/.exec(rest);
    if (commit) {
      const ref = decodeURIComponent(commit[1]!);
      const sha = this.resolve(repo, ref);
      if (!sha) return json(422, { message: `No commit found for SHA: ${ref}` });
      if (/application\/vnd\.github(?:\.v3)?\.sha/.test(accept)) {
        return {
          status: 200,
          headers: { 'content-type': 'application/vnd.github.sha; charset=utf-8' },
          body: sha,
        };
      }
      return json(200, { sha, commit: { message: 'test commit' } });
    }
    const gitCommit = /^\/git\/commits\/([0-9a-f]{40})$/i.exec(rest);
    if (gitCommit) {
      const sha = gitCommit[1]!.toLowerCase();
      const files = repo.commits.get(sha);
      if (!files) return notFound();
      return json(200, { sha, tree: { sha: this.treesOf(repo, sha).root }, message: 'test commit' });
    }
    const gitTree = /^\/git\/trees\/([0-9a-f]{40})$/i.exec(rest);
    if (gitTree) {
      const id = gitTree[1]!.toLowerCase();
      for (const sha of repo.commits.keys()) {
        const entries = this.treesOf(repo, sha).trees.get(id);
        if (entries) return json(200, { sha: id, tree: entries, truncated: false });
      }
      return notFound();
    }
    const contents = /^\/contents\/(.+)$/.exec(rest);
    if (contents) {
      const ref = url.searchParams.get('ref') ?? repo.defaultBranch;
      const sha = this.resolve(repo, ref);
      if (!sha) return json(404, { message: `No commit found for the ref ${ref}` });
      const files = repo.commits.get(sha)!;
      const path = contents[1]!.split('/').map(decodeURIComponent).join('/');
      const content = files[path];
      if (content === undefined) {
        const children = Object.keys(files).filter((f) => f.startsWith(`${path}/`));
        if (children.length === 0) return notFound();
        const names = [...new Set(children.map((f) => f.slice(path.length + 1).split('/')[0]!))];
        const entry = (name: string) => ({
          name,
          path: `${path}/${name}`,
          type: files[`${path}/${name}`] === undefined ? 'dir' : 'file',
        });
        return json(200, names.map(entry));
      }
      if (/application\/vnd\.github(?:\.v3)?\.raw/.test(accept)) {
        return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: content };
      }
      const base64 = Buffer.from(content).toString('base64');
      return json(200, { type: 'file', path, encoding: 'base64', content: base64 });
    }
    const tarball = /^\/tarball\/(.+)$/.exec(rest);
    if (tarball) {
      const sha = this.resolve(repo, decodeURIComponent(tarball[1]!));
      if (!sha) return notFound();
      const download = randomBytes(16).toString('hex');
      this.downloads.set(download, { repo: repo.fullName.toLowerCase(), sha });
      const [owner, name] = repo.fullName.split('/');
      const location = `${this.url}/_codeload/${owner}/${name}/legacy.tar.gz/${sha}?token=${download}`;
      return { status: 302, headers: { location } };
    }
    return notFound();
  }

  /** A pull request's changed files, paged as GitHub pages them (page numbers, at most 3,000 files). */
  private pullFiles(repo: FakeRepo, p: FakePull, number: number, url: URL): Reply {
    const base = repo.commits.get(p.baseSha ?? repo.branches.get(repo.defaultBranch) ?? '') ?? {};
    const head = repo.commits.get(p.headSha) ?? {};
    const changed = [...new Set([...Object.keys(base), ...Object.keys(head)])]
      .sort()
      .filter((path) => base[path] !== head[path])
      .slice(0, 3_000)
      .map((filename) => ({
        filename,
        status:
          base[filename] === undefined ? 'added' : head[filename] === undefined ? 'removed' : 'modified',
      }));
    const perPage = Math.min(Number(url.searchParams.get('per_page') ?? 30) || 30, 100);
    const page = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
    const slice = changed.slice((page - 1) * perPage, page * perPage);
    const headers: Record<string, string> = {};
    if (page * perPage < changed.length) {
      const next = new URL(`${this.url}/repos/${repo.fullName}/pulls/${number}/files`);
      next.searchParams.set('per_page', String(perPage));
      next.searchParams.set('page', String(page + 1));
      headers.link = `<${next.href}>; rel="next"`;
    }
    this.filesPages++;
    return json(200, slice, headers);
  }

  /** Like codeload.github.com: the short-lived token in the URL is the credential. */
  private download(m: RegExpExecArray, token: string): Reply {
    const download = this.downloads.get(token);
    const repo = `${m[1]}/${m[2]}`.toLowerCase();
    if (!download || download.repo !== repo || download.sha !== m[3]) return notFound();
    const body = this.tarball(repo, m[3]!);
    return {
      status: 200,
      headers: {
        'content-type': 'application/x-gzip',
        'content-length': String(body.length),
        'content-disposition': `attachment; filename=${m[1]}-${m[2]}-${m[3]!.slice(0, 7)}.tar.gz`,
      },
      body,
    };
  }

  private mintToken(appId: string, id: number): Reply {
    const installation = this.installations.get(id);
    if (!installation || installation.appId !== appId) return notFound();
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    const expiresAt = Math.floor(this.now() / 1000 + this.tokenLifetimeSeconds) * 1000;
    this.tokens.set(token, { installationId: id, expiresAt });
    this.tokensMinted++;
    return json(201, {
      token,
      expires_at: new Date(expiresAt).toISOString().replace('.000Z', 'Z'),
      permissions: { contents: 'read', metadata: 'read' },
      repository_selection: 'selected',
    });
  }

  /** The App a request's JWT authenticates, or the 401 to answer. */
  private appOf(req: IncomingMessage): string | Reply {
    const parts = /^bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1]?.split('.') ?? [];
    const undecodable = badCredentials('A JSON web token could not be decoded');
    if (parts.length !== 3) return undecodable;
    const [header, payload, signature] = parts as [string, string, string];
    let claims: { iss?: unknown; iat?: unknown; exp?: unknown };
    try {
      if (JSON.parse(Buffer.from(header, 'base64url').toString()).alg !== 'RS256') return undecodable;
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    } catch {
      return undecodable;
    }
    const appId = String(claims.iss);
    const key = this.apps.get(appId);
    const signed = Buffer.from(`${header}.${payload}`);
    if (!key || !verifySignature('sha256', signed, key, Buffer.from(signature, 'base64url'))) {
      return badCredentials();
    }
    const now = Math.floor(Date.now() / 1000);
    const { iat, exp } = claims;
    if (typeof exp !== 'number' || exp <= now) {
      return badCredentials(
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
      );
    }
    if (exp > now + 660) return badCredentials("'Expiration time' claim ('exp') is too far in the future");
    if (typeof iat !== 'number' || iat > now + 60) {
      return badCredentials(
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
      );
    }
    return appId;
  }

  private installationOf(appId: string, fullName: string): number | undefined {
    for (const [id, i] of this.installations)
      if (i.appId === appId && i.repos.has(fullName.toLowerCase())) return id;
    return undefined;
  }

  /** A branch name, a full SHA or a unique prefix of at least 7 characters → the commit's SHA. */
  private resolve(repo: FakeRepo, ref: string): string | undefined {
    const branch = repo.branches.get(ref);
    if (branch) return branch;
    if (!/^[0-9a-f]{7,40}$/i.test(ref)) return undefined;
    const matches = [...repo.commits.keys()].filter((sha) => sha.startsWith(ref.toLowerCase()));
    return matches.length === 1 ? matches[0] : undefined;
  }

  /** A commit's git trees (computed once per commit: commits do not change). */
  private treesOf(repo: FakeRepo, sha: string): { root: string; trees: Map<string, FakeTreeEntry[]> } {
    const key = `${repo.fullName.toLowerCase()}@${sha}`;
    let trees = this.gitTrees.get(key);
    if (!trees) {
      trees = gitTrees(repo.commits.get(sha) ?? {});
      this.gitTrees.set(key, trees);
    }
    return trees;
  }

  private tarball(repoKey: string, sha: string): Buffer {
    const key = `${repoKey}@${sha}`;
    const cached = this.tarballs.get(key);
    if (cached) return cached;
    const repo = this.repos.get(repoKey)!;
    const top = `${repo.fullName.replace('/', '-')}-${sha.slice(0, 7)}`;
    const dir = mkdtempSync(join(tmpdir(), 'fake-github-'));
    try {
      mkdirSync(join(dir, top));
      for (const [path, content] of Object.entries(repo.commits.get(sha) ?? {})) {
        mkdirSync(dirname(join(dir, top, path)), { recursive: true });
        writeFileSync(join(dir, top, path), content);
      }
      const body = execFileSync('tar', ['-cz', '-C', dir, top], { maxBuffer: 64 * 1024 * 1024 });
      this.tarballs.set(key, body);
      return body;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
