import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
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
 * PR status, locally: the calls GitHub would get, appended to `<dataDir>/github-outbox.jsonl`, one JSON
 * object per write (`{time, method, path, body, response: {status, id}}`), so users and tests see what
 * would be sent. The reads of the algorithm (the comment by its marker, the deployment of a commit) are
 * answered from what the outbox holds, read back on start, so a comment is updated in place across
 * restarts exactly as on GitHub. Check runs (the merge gate) are POSTed and PATCHed the same way, and a
 * commit's check runs are listed from them (`GET …/commits/{sha}/check-runs`: by `check_name`, `status`,
 * `filter`, paged; times at whole seconds, as GitHub keeps them). Reports are published one at a time.
 */

/** The outbox file of a data dir. */
export const githubOutboxPath = (dataDir: string): string => join(dataDir, 'github-outbox.jsonl');

/** One line of the outbox. */
export interface OutboxLine {
  time: string;
  method: 'POST' | 'PATCH' | 'DELETE';
  path: string;
  body: Record<string, unknown>;
  response: { status: number; id?: number };
}

interface Deployment {
  id: number;
  repo: string;
  environment: string;
  sha: string;
  payload: unknown;
}
interface CheckRun {
  id: number;
  repo: string;
  name: string;
  head_sha: string;
  external_id: string | null;
  status: string;
  conclusion: string | null;
  started_at: string;
  completed_at: string | null;
}
interface Comment {
  id: number;
  repo: string;
  issue: number;
  body: string;
}

const REPO = '/repos/([^/]+)/([^/?]+)';
const repoOf = (m: RegExpExecArray) =>
  `${decodeURIComponent(m[1]!)}/${decodeURIComponent(m[2]!)}`.toLowerCase();

/** A GitHub REST transport that records writes in the outbox and answers reads from it. */
export class OutboxRest implements GitHubRest {
  private nextId = 1;
  private readonly deployments: Deployment[] = [];
  private readonly comments: Comment[] = [];
  private readonly checkRuns = new Map<number, CheckRun>();

  constructor(private readonly path: string) {
    if (!existsSync(path)) return;
    for (const text of readFileSync(path, 'utf8').split('\n')) {
      if (!text.trim()) continue;
      try {
        this.apply(JSON.parse(text) as OutboxLine);
      } catch {
        // a torn last line (a crash mid-append): skipped
      }
    }
  }

  async request(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body: Record<string, unknown> = {},
  ): Promise<RestResponse> {
    const url = new URL(path, 'http://github.local');
    const p = url.pathname;
    if (method === 'GET') {
      const comments = new RegExp(`^${REPO}/issues/(\\d+)/comments$`).exec(p);
      if (comments) {
        const page = Number(url.searchParams.get('page') ?? 1);
        const per = Number(url.searchParams.get('per_page') ?? 30);
        const all = this.comments.filter(
          (c) => c.repo === repoOf(comments) && c.issue === Number(comments[3]),
        );
        return { status: 200, data: all.slice((page - 1) * per, page * per).map((c) => ({ ...c })) };
      }
      const deployments = new RegExp(`^${REPO}/deployments$`).exec(p);
      if (deployments) {
        const env = url.searchParams.get('environment');
        const sha = url.searchParams.get('sha');
        const found = this.deployments.filter(
          (d) => d.repo === repoOf(deployments) && (!env || d.environment === env) && (!sha || d.sha === sha),
        );
        return { status: 200, data: found.reverse().map((d) => ({ ...d })) };
      }
      const checkRuns = new RegExp(`^${REPO}/commits/([^/]+)/check-runs$`).exec(p);
      if (checkRuns) return { status: 200, data: this.listCheckRuns(repoOf(checkRuns), checkRuns[3]!, url) };
      return { status: 404, data: { message: 'Not Found' } };
    }
    const line: OutboxLine = { time: new Date().toISOString(), method, path, body, response: { status: 0 } };
    line.response = this.apply(line);
    if (line.response.status >= 400) return { status: line.response.status, data: { message: 'Not Found' } };
    appendFileSync(this.path, `${JSON.stringify(line)}\n`, { mode: 0o600 });
    return { status: line.response.status, data: { id: line.response.id } };
  }

  /**
   * A commit's check runs as GitHub lists them (`{total_count, check_runs}`, newest first): by
   * `check_name` and `status`; `filter=latest` (GitHub's default) keeps the newest of each name.
   */
  private listCheckRuns(repo: string, ref: string, url: URL) {
    const sha = decodeURIComponent(ref).toLowerCase();
    const name = url.searchParams.get('check_name');
    const status = url.searchParams.get('status');
    let found = [...this.checkRuns.values()]
      .filter(
        (r) =>
          r.repo === repo &&
          r.head_sha === sha &&
          (!name || r.name === name) &&
          (!status || r.status === status),
      )
      .sort((a, b) => b.id - a.id);
    if ((url.searchParams.get('filter') ?? 'latest') === 'latest')
      found = found.filter((r, i) => found.findIndex((o) => o.name === r.name) === i);
    const page = Number(url.searchParams.get('page') ?? 1);
    const per = Number(url.searchParams.get('per_page') ?? 30);
    return {
      total_count: found.length,
      check_runs: found.slice((page - 1) * per, page * per).map((r) => ({ ...r })),
    };
  }

  /** Apply a write to the state; its response (the same when replayed from the file). */
  private apply(line: OutboxLine): OutboxLine['response'] {
    const p = new URL(line.path, 'http://github.local').pathname;
    const id = line.response?.id ?? this.nextId;
    const take = () => {
      this.nextId = Math.max(this.nextId, id + 1);
      return id;
    };
    const match = (method: OutboxLine['method'], tail: string) =>
      line.method === method ? new RegExp(`^${REPO}${tail}$`).exec(p) : null;
    const deployment = match('POST', '/deployments');
    if (deployment) {
      this.deployments.push({
        id: take(),
        repo: repoOf(deployment),
        environment: String(line.body.environment),
        sha: String(line.body.ref),
        payload: line.body.payload,
      });
      return { status: 201, id };
    }
    const status = match('POST', '/deployments/(\\d+)/statuses');
    if (status) {
      if (!this.deployments.some((d) => d.id === Number(status[3]))) return { status: 404 };
      return { status: 201, id: take() };
    }
    const created = match('POST', '/issues/(\\d+)/comments');
    if (created) {
      this.comments.push({
        id: take(),
        repo: repoOf(created),
        issue: Number(created[3]),
        body: String(line.body.body),
      });
      return { status: 201, id };
    }
    const checkRun = match('POST', '/check-runs');
    if (checkRun) {
      const run: CheckRun = {
        id: take(),
        repo: repoOf(checkRun),
        name: String(line.body.name),
        head_sha: String(line.body.head_sha).toLowerCase(),
        external_id: null,
        status: 'queued',
        conclusion: null,
        started_at: wholeSeconds(line.time),
        completed_at: null,
      };
      this.checkRuns.set(id, run);
      this.updateCheckRun(run, line);
      return { status: 201, id };
    }
    const checkRunUpdate = match('PATCH', '/check-runs/(\\d+)');
    if (checkRunUpdate) {
      const run = this.checkRuns.get(Number(checkRunUpdate[3]));
      if (!run || run.repo !== repoOf(checkRunUpdate)) return { status: 404 };
      this.updateCheckRun(run, line);
      return { status: 200, id: run.id };
    }
    const deleted = match('DELETE', '/issues/comments/(\\d+)');
    if (deleted) {
      const at = this.comments.findIndex((c) => c.id === Number(deleted[3]));
      if (at < 0) return { status: 404 };
      this.comments.splice(at, 1);
      return { status: 204 };
    }
    const updated = match('PATCH', '/issues/comments/(\\d+)');
    if (updated) {
      const comment = this.comments.find((c) => c.id === Number(updated[3]));
      if (!comment) return { status: 404 };
      comment.body = String(line.body.body);
      return { status: 200, id: comment.id };
    }
    return { status: 404 };
  }

  /** What a check run's POST or PATCH body changes of it. */
  private updateCheckRun(run: CheckRun, line: OutboxLine): void {
    const b = line.body;
    if (typeof b.external_id === 'string') run.external_id = b.external_id;
    if (typeof b.status === 'string') run.status = b.status;
    if (typeof b.conclusion === 'string') {
      run.status = 'completed';
      run.conclusion = b.conclusion;
      run.completed_at = wholeSeconds(typeof b.completed_at === 'string' ? b.completed_at : line.time);
    }
  }
}

/** A time at whole seconds, as GitHub keeps a check run's. */
const wholeSeconds = (iso: string) => new Date(iso).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The PrStatus port, locally: GitHub's calls in the outbox. */
export class LocalOutboxPrStatus implements PrStatus {
  private readonly rest: OutboxRest;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(dataDir: string) {
    this.rest = new OutboxRest(githubOutboxPath(dataDir));
  }

  publish(report: PrReport): Promise<PublishOutcome> {
    return this.serial(() => publishToGitHub(this.rest, report));
  }

  createCheckRun(write: CheckRunWrite): Promise<number> {
    return this.serial(() => createCheckRun(this.rest, write));
  }

  findCheckRun(lookup: CheckRunLookup): Promise<number | undefined> {
    return this.serial(() => findCheckRun(this.rest, lookup));
  }

  updateCheckRun(id: number, write: CheckRunWrite): Promise<void> {
    return this.serial(() => updateCheckRun(this.rest, id, write));
  }

  reply(repoFullName: string, prNumber: number, body: string): Promise<void> {
    return this.serial(() => replyComment(this.rest, repoFullName, prNumber, body));
  }

  private serial<T>(call: () => Promise<T>): Promise<T> {
    const next = this.chain.then(call);
    this.chain = next.catch(() => undefined);
    return next;
  }
}
