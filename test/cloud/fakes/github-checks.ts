/**
 * The check-runs routes of the GitHub fake (github.ts mounts them behind its installation-token check).
 * Test support code, not product.
 *
 * What it implements, and only that:
 * - `POST /repos/{o}/{r}/check-runs` → 201 and the check run: `name` and `head_sha` required, `head_sha`
 *   a commit of the repository (else 422 `No commit found for SHA`); `status` one of `queued`,
 *   `in_progress`, `completed` (default `queued`); `conclusion` required when `status` is `completed`,
 *   and only with it (a conclusion without a status completes the run, as GitHub documents); `output`,
 *   when sent, needs `title` and `summary`; at most 3 `actions`, each `label` ≤ 20, `description` ≤ 40,
 *   `identifier` ≤ 20 characters. Anything else → 422 `{"message": …}`, nothing stored.
 * - `PATCH /repos/{o}/{r}/check-runs/{id}` → 200 and the check run, the same rules over what it then
 *   holds; an unknown id, or one of another repository → 404.
 * - Timestamps at whole seconds, as GitHub keeps them: `started_at` at creation, `completed_at` when it
 *   completes (the one sent, cut to the second, else now).
 * - `GET /repos/{o}/{r}/commits/{ref}/check-runs` → 200 `{total_count, check_runs}`, newest first: the
 *   check runs of the commit `ref` names (a SHA or a branch; neither → 422 `No commit found for SHA`),
 *   by `check_name` and `status` (one of the three, else 422); `filter` `latest` (the default: the newest
 *   of each name) or `all` (else 422); `per_page` (default 30, at most 100) and `page`.
 * - `runs` keeps each check run as it is now; `writes` every accepted POST and PATCH with its body, in
 *   order (with when it arrived, to the millisecond): the story a test reads.
 * What it does not: getting one check run, check suites, annotations, images, rerequests, `app_id`.
 */

export type CheckStatus = 'queued' | 'in_progress' | 'completed';

/** A check run as the fake holds it (GitHub's field names). */
export interface FakeCheckRun {
  id: number;
  repo: string;
  name: string;
  head_sha: string;
  status: CheckStatus;
  conclusion: string | null;
  external_id: string | null;
  details_url: string | null;
  started_at: string;
  completed_at: string | null;
  output: { title: string | null; summary: string | null; text: string | null };
  actions: { label: string; description: string; identifier: string }[];
}

/** One accepted write: what was sent, to which check run, when (whole seconds). */
export interface CheckRunWriteRecord {
  method: 'POST' | 'PATCH';
  repo: string;
  id: number;
  body: Record<string, unknown>;
  at: string;
  /** When the fake took it, to the millisecond (a test's timing; GitHub shows whole seconds). */
  receivedAt: string;
}

interface Reply {
  status: number;
  body: unknown;
}

const STATUSES = ['queued', 'in_progress', 'completed'];
const CONCLUSIONS = ['action_required', 'cancelled', 'failure', 'neutral', 'success', 'skipped', 'timed_out'];

/** A time at whole seconds, as GitHub shows it. */
export const wholeSeconds = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

const invalid = (message: string): Reply => ({
  status: 422,
  body: { message, documentation_url: 'https://docs.github.com/rest/checks/runs' },
});
const notFound = (): Reply => ({
  status: 404,
  body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' },
});

export class FakeCheckRuns {
  readonly runs = new Map<number, FakeCheckRun>();
  readonly writes: CheckRunWriteRecord[] = [];
  private nextId = 4_000_000_001;

  constructor(private readonly now: () => number = Date.now) {}

  /** The check runs of a head commit, oldest first. */
  ofHead(sha: string): FakeCheckRun[] {
    return [...this.runs.values()].filter((r) => r.head_sha === sha.toLowerCase());
  }

  /** The writes of one check run, in order. */
  storyOf(id: number): CheckRunWriteRecord[] {
    return this.writes.filter((w) => w.id === id);
  }

  /**
   * A request under `/repos/{o}/{r}/check-runs` (`rest` from `/check-runs` on), the repository's
   * installation token already checked; `hasCommit` says whether a SHA is one of its commits.
   */
  handle(
    method: string,
    repo: string,
    rest: string,
    rawBody: string,
    hasCommit: (sha: string) => boolean,
    url?: URL,
    resolve?: (ref: string) => string | undefined,
  ): Reply {
    const listed = /^\/commits\/([^/]+)\/check-runs$/.exec(rest);
    if (method === 'GET' && listed && url && resolve)
      return this.list(repo, resolve(decodeURIComponent(listed[1]!)), listed[1]!, url.searchParams);
    const patch = /^\/check-runs\/(\d+)$/.exec(rest);
    if (!(method === 'POST' && rest === '/check-runs') && !(method === 'PATCH' && patch)) return notFound();
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(rawBody || '{}');
    } catch {
      return { status: 400, body: { message: 'Problems parsing JSON' } };
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return invalid("Invalid request.\n\nFor 'links/0/schema', … is not an object.");

    let current: FakeCheckRun | undefined;
    if (patch) {
      current = this.runs.get(Number(patch[1]));
      if (!current || current.repo !== repo.toLowerCase()) return notFound();
    } else {
      for (const field of ['name', 'head_sha'])
        if (typeof body[field] !== 'string' || !body[field])
          return invalid(`Invalid request.\n\n"${field}" wasn't supplied.`);
      if (!hasCommit(String(body.head_sha))) return invalid(`No commit found for SHA: ${body.head_sha}`);
    }

    const problem = this.check(body, current);
    if (problem) return invalid(problem);

    const at = this.now();
    const status = (body.status ??
      (body.conclusion !== undefined ? 'completed' : (current?.status ?? 'queued'))) as CheckStatus;
    const completed = status === 'completed';
    const output = body.output as { title?: string; summary?: string; text?: string } | undefined;
    const run: FakeCheckRun = {
      id: current?.id ?? this.nextId++,
      repo: repo.toLowerCase(),
      name: typeof body.name === 'string' ? body.name : current!.name,
      head_sha: current?.head_sha ?? String(body.head_sha).toLowerCase(),
      status,
      conclusion: completed ? String(body.conclusion ?? current?.conclusion) : null,
      external_id: (body.external_id as string | undefined) ?? current?.external_id ?? null,
      details_url: (body.details_url as string | undefined) ?? current?.details_url ?? null,
      started_at: current?.started_at ?? wholeSeconds(at),
      completed_at: completed
        ? wholeSeconds(typeof body.completed_at === 'string' ? Date.parse(body.completed_at) : at)
        : null,
      output: output
        ? { title: output.title ?? null, summary: output.summary ?? null, text: output.text ?? null }
        : (current?.output ?? { title: null, summary: null, text: null }),
      actions: (body.actions as FakeCheckRun['actions'] | undefined) ?? current?.actions ?? [],
    };
    this.runs.set(run.id, run);
    this.writes.push({
      method: patch ? 'PATCH' : 'POST',
      repo: run.repo,
      id: run.id,
      body,
      at: wholeSeconds(at),
      receivedAt: new Date(at).toISOString(),
    });
    return { status: patch ? 200 : 201, body: run };
  }

  /** A commit's check runs, as `GET /repos/{o}/{r}/commits/{ref}/check-runs` answers. */
  private list(repo: string, sha: string | undefined, ref: string, q: URLSearchParams): Reply {
    if (!sha) return invalid(`No commit found for SHA: ${decodeURIComponent(ref)}`);
    const name = q.get('check_name');
    const status = q.get('status');
    const filter = q.get('filter') ?? 'latest';
    if (status !== null && !STATUSES.includes(status))
      return invalid(
        `Invalid request.\n\n${JSON.stringify(status)} is not a member of [${STATUSES.join(', ')}].`,
      );
    if (filter !== 'latest' && filter !== 'all')
      return invalid(`Invalid request.\n\n${JSON.stringify(filter)} is not a member of [latest, all].`);
    const per = Math.min(100, Math.max(1, Number(q.get('per_page') ?? 30) || 30));
    const page = Math.max(1, Number(q.get('page') ?? 1) || 1);
    let found = [...this.runs.values()]
      .filter(
        (r) =>
          r.repo === repo.toLowerCase() &&
          r.head_sha === sha &&
          (name === null || r.name === name) &&
          (status === null || r.status === status),
      )
      .sort((a, b) => b.id - a.id);
    if (filter === 'latest') found = found.filter((r, i) => found.findIndex((o) => o.name === r.name) === i);
    return {
      status: 200,
      body: { total_count: found.length, check_runs: found.slice((page - 1) * per, page * per) },
    };
  }

  /** What GitHub refuses in a check run's fields (undefined: nothing). */
  private check(body: Record<string, unknown>, current?: FakeCheckRun): string | undefined {
    const { status, conclusion, output, actions, completed_at } = body;
    if (status !== undefined && !STATUSES.includes(String(status)))
      return `Invalid request.\n\n${JSON.stringify(status)} is not a member of [${STATUSES.join(', ')}].`;
    if (conclusion !== undefined && !CONCLUSIONS.includes(String(conclusion)))
      return `Invalid request.\n\n${JSON.stringify(conclusion)} is not a valid conclusion.`;
    if (status === 'completed' && conclusion === undefined && !current?.conclusion)
      return 'Invalid request.\n\n"conclusion" wasn\'t supplied.';
    if (conclusion !== undefined && status !== undefined && status !== 'completed')
      return 'Invalid request.\n\n"conclusion" is only allowed when "status" is "completed".';
    if (completed_at !== undefined && Number.isNaN(Date.parse(String(completed_at))))
      return 'Invalid request.\n\n"completed_at" is not a timestamp.';
    if (output !== undefined) {
      const o = output as Record<string, unknown> | null;
      if (!o || typeof o.title !== 'string' || typeof o.summary !== 'string')
        return 'Invalid request.\n\n"title" and "summary" are required in "output".';
    }
    if (actions !== undefined) {
      if (!Array.isArray(actions) || actions.length > 3)
        return 'Invalid request.\n\n"actions" holds at most 3 actions.';
      for (const a of actions as Record<string, unknown>[]) {
        const ok = (k: string, max: number) => typeof a?.[k] === 'string' && (a[k] as string).length <= max;
        if (!ok('label', 20) || !ok('description', 40) || !ok('identifier', 20))
          return 'Invalid request.\n\nan action needs a label (≤ 20), a description (≤ 40), an identifier (≤ 20).';
      }
    }
    return undefined;
  }
}
