/**
 * The issue-comment routes of the GitHub fake (github.ts mounts them behind its installation-token check).
 * Test support code, not product.
 *
 * What it implements, and only that, for the pull requests a test set with `setPull` (a pull request is
 * an issue on GitHub; any other number → 404, as GitHub answers for an issue that does not exist):
 * - `GET /repos/{o}/{r}/issues/{n}/comments` → 200 and its comments, oldest first, `per_page` (default
 *   30, at most 100) and `page`.
 * - `POST /repos/{o}/{r}/issues/{n}/comments` → 201 and the comment: `body` a non-empty string of at most
 *   65,536 characters (else 422 `{"message": …}`, nothing stored), written by the App's bot user.
 * - `PATCH /repos/{o}/{r}/issues/comments/{id}` → 200 (the same rule for `body`); `DELETE` of it → 204;
 *   an unknown id, or one of another repository → 404.
 * - `comments` keeps each comment as it is now; `writes` every accepted POST, PATCH and DELETE in order.
 * What it does not: reactions, issues that are not pull requests, edits by other users, `since`, Link headers.
 */

/** A comment as the fake holds it (GitHub's field names). */
export interface FakeComment {
  id: number;
  repo: string;
  issue: number;
  body: string;
  user: { login: string; type: 'Bot' };
  created_at: string;
  updated_at: string;
}

/** One accepted write. */
export interface CommentWriteRecord {
  method: 'POST' | 'PATCH' | 'DELETE';
  repo: string;
  issue: number;
  id: number;
  body?: string;
}

interface Reply {
  status: number;
  body?: unknown;
}

const MAX_BODY = 65_536;
const BOT = { login: 'preview-app[bot]', type: 'Bot' as const };
const notFound = (): Reply => ({
  status: 404,
  body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' },
});
const invalid = (message: string): Reply => ({
  status: 422,
  body: { message, documentation_url: 'https://docs.github.com/rest/issues/comments' },
});

export class FakeIssueComments {
  readonly comments = new Map<number, FakeComment>();
  readonly writes: CommentWriteRecord[] = [];
  private nextId = 7_000_000_001;

  constructor(private readonly now: () => number = Date.now) {}

  /** The comments of a pull request of `repo`, oldest first. */
  on(repo: string, issue: number): FakeComment[] {
    return [...this.comments.values()].filter((c) => c.repo === repo.toLowerCase() && c.issue === issue);
  }

  /** Whether a path under `/repos/{o}/{r}` is one of these routes. */
  static routes(rest: string): boolean {
    return /^\/issues\/(\d+\/comments|comments\/\d+)$/.test(rest);
  }

  /**
   * A request under `/repos/{o}/{r}/issues` (`rest` from `/issues` on), the repository's installation
   * token already checked; `hasIssue` says whether a number is one of its pull requests.
   */
  handle(
    method: string,
    repo: string,
    rest: string,
    rawBody: string,
    hasIssue: (n: number) => boolean,
    url: URL,
  ): Reply {
    const key = repo.toLowerCase();
    const listed = /^\/issues\/(\d+)\/comments$/.exec(rest);
    if (listed) {
      const issue = Number(listed[1]);
      if (!hasIssue(issue)) return notFound();
      if (method === 'GET') {
        const per = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30) || 30));
        const page = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
        return { status: 200, body: this.on(key, issue).slice((page - 1) * per, page * per) };
      }
      if (method !== 'POST') return notFound();
      const body = this.bodyOf(rawBody);
      if (typeof body !== 'string') return body;
      const at = new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const c: FakeComment = {
        id: this.nextId++,
        repo: key,
        issue,
        body,
        user: BOT,
        created_at: at,
        updated_at: at,
      };
      this.comments.set(c.id, c);
      this.writes.push({ method: 'POST', repo: key, issue, id: c.id, body });
      return { status: 201, body: c };
    }
    const one = /^\/issues\/comments\/(\d+)$/.exec(rest);
    const c = one ? this.comments.get(Number(one[1])) : undefined;
    if (!c || c.repo !== key) return notFound();
    if (method === 'DELETE') {
      this.comments.delete(c.id);
      this.writes.push({ method: 'DELETE', repo: key, issue: c.issue, id: c.id });
      return { status: 204 };
    }
    if (method !== 'PATCH') return notFound();
    const body = this.bodyOf(rawBody);
    if (typeof body !== 'string') return body;
    c.body = body;
    c.updated_at = new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    this.writes.push({ method: 'PATCH', repo: key, issue: c.issue, id: c.id, body });
    return { status: 200, body: c };
  }

  /** The `body` of a write, or the 4xx GitHub answers. */
  private bodyOf(rawBody: string): string | Reply {
    let parsed: unknown;
    try {
      parsed = JSON.parse(rawBody || '{}');
    } catch {
      return { status: 400, body: { message: 'Problems parsing JSON' } };
    }
    const body = (parsed as { body?: unknown } | null)?.body;
    if (typeof body !== 'string' || !body) return invalid('Invalid request.\n\n"body" wasn\'t supplied.');
    if (body.length > MAX_BODY)
      return invalid('Validation Failed: body is too long (maximum is 65536 characters)');
    return body;
  }
}
