import type { CheckRunLookup, CheckRunWrite, PrReport, PublishOutcome } from './port.js';

/*
 * What reporting an environment on GitHub is, as REST calls (`{o}/{r}` the repository):
 *   comment lookup   GET   /repos/{o}/{r}/issues/{pr}/comments?per_page=100&page=N   (until the marker)
 *   deployment       GET   /repos/{o}/{r}/deployments?environment=E&sha=S&per_page=100
 *                    POST  /repos/{o}/{r}/deployments   (none of ours for this commit yet)
 *   its status       POST  /repos/{o}/{r}/deployments/{id}/statuses
 *   the comment      PATCH /repos/{o}/{r}/issues/comments/{id}  or  POST /repos/{o}/{r}/issues/{pr}/comments
 *   after a POST     GET (the comments again), DELETE /repos/{o}/{r}/issues/comments/{id} of duplicates
 * and the merge gate's check runs (core/gate/): POST /repos/{o}/{r}/check-runs, PATCH …/check-runs/{id},
 * and before a create GET /repos/{o}/{r}/commits/{sha}/check-runs?check_name=N&filter=all (by external_id).
 * GitHub has no conditional create, so two reporters that both found no comment (two functions reporting
 * the same pull request for the first time) both create one; each then lists the comments carrying the
 * marker again and keeps the oldest (lowest id), deleting the others and showing its report on the kept
 * one unless that already shows a newer one. Both racers agree on the oldest, so one comment remains.
 * The comment carries the report's version (generation, last change): a report older than the comment
 * changes nothing, neither the deployment nor the comment, so a superseded deploy never overwrites a newer
 * status. A teardown (`inactive`) of a commit that never got a deployment creates none.
 */

export interface RestResponse {
  status: number;
  data: unknown;
}

/** A GitHub REST transport: a call, and GitHub's answer (HTTP errors are answers, not throws). */
export interface GitHubRest {
  request(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: Record<string, unknown>,
  ): Promise<RestResponse>;
}

const MARKER = 'preview-control-plane';
const PAGE = 100;
/** The longest comment body GitHub takes is 65536 characters. */
const MAX_COMMENT = 60_000;

/** The marker that finds the comment of one environment. */
export const commentMarker = (r: Pick<PrReport, 'ownerTag' | 'repoFullName' | 'prNumber'>): string =>
  `<!-- ${MARKER}:${r.ownerTag}:${r.repoFullName.toLowerCase()}#${r.prNumber} -->`;

const versionMarker = (v: PrReport['version']) => `<!-- ${MARKER}-version:${v.generation}:${v.at} -->`;

/** The version a comment body carries, if any. */
export function versionOf(body: string): PrReport['version'] | undefined {
  const m = new RegExp(`<!-- ${MARKER}-version:(\\d+):([^ ]+) -->`).exec(body);
  return m ? { generation: Number(m[1]), at: m[2]! } : undefined;
}

/** Whether `a` is older than `b`. */
export function olderThan(a: PrReport['version'], b: PrReport['version']): boolean {
  return a.generation < b.generation || (a.generation === b.generation && a.at < b.at);
}

/** The comment body as published: the markers, then the report's text. */
export function commentBody(report: PrReport): string {
  const text = report.comment ?? '';
  const body = `${commentMarker(report)}\n${versionMarker(report.version)}\n${text}`;
  return body.length > MAX_COMMENT ? `${body.slice(0, MAX_COMMENT)}\n\n…(truncated)` : body;
}

class GitHubCallFailed extends Error {
  override name = 'GitHubCallFailed';
}

function expect(res: RestResponse, ok: number[], what: string): RestResponse {
  if (ok.includes(res.status)) return res;
  const message = (res.data as { message?: unknown } | undefined)?.message;
  throw new GitHubCallFailed(
    `GitHub answered ${res.status} to ${what}${typeof message === 'string' ? `: ${message}` : ''}`,
  );
}

const enc = encodeURIComponent;

/** Publish a report through a transport (the algorithm of the file comment). */
export async function publishToGitHub(rest: GitHubRest, report: PrReport): Promise<PublishOutcome> {
  const [owner, name] = report.repoFullName.split('/') as [string, string];
  const repo = `/repos/${enc(owner)}/${enc(name)}`;

  let comment: Comment | undefined;
  if (report.prNumber > 0 && report.comment !== undefined) {
    comment = (await markedComments(rest, repo, report, true))[0];
    const shown = comment && versionOf(comment.body);
    if (shown && olderThan(report.version, shown))
      return { published: false, reason: 'the pull request already shows a newer status' };
  }

  const deploymentId = await deployment(rest, repo, report);
  if (deploymentId !== undefined) {
    expect(
      await rest.request('POST', `${repo}/deployments/${deploymentId}/statuses`, {
        state: report.state,
        description: report.description.slice(0, 140),
        ...(report.environmentUrl ? { environment_url: report.environmentUrl } : {}),
        environment: report.environment,
      }),
      [201],
      'creating a deployment status',
    );
  }

  let commentId: number | undefined;
  if (report.prNumber > 0 && report.comment !== undefined) {
    const body = commentBody(report);
    if (comment) {
      expect(
        await rest.request('PATCH', `${repo}/issues/comments/${comment.id}`, { body }),
        [200],
        'updating the pull request comment',
      );
      commentId = comment.id;
    } else {
      const res = expect(
        await rest.request('POST', `${repo}/issues/${report.prNumber}/comments`, { body }),
        [201],
        'commenting on the pull request',
      );
      commentId = await keepOldest(rest, repo, report, { id: (res.data as { id: number }).id, body });
    }
  }
  return { published: true, deploymentId, commentId };
}

interface Comment {
  id: number;
  body: string;
}

/** The comments of the report's pull request that carry its marker, oldest first (or only the first). */
async function markedComments(rest: GitHubRest, repo: string, report: PrReport, first: boolean) {
  const marker = commentMarker(report);
  const found: Comment[] = [];
  for (let page = 1; page <= 50; page++) {
    const res = expect(
      await rest.request('GET', `${repo}/issues/${report.prNumber}/comments?per_page=${PAGE}&page=${page}`),
      [200],
      'listing the pull request comments',
    );
    const list = (res.data ?? []) as { id: number; body?: unknown }[];
    for (const c of list)
      if (typeof c.body === 'string' && c.body.includes(marker)) found.push({ id: c.id, body: c.body });
    if ((first && found.length > 0) || list.length < PAGE) break;
  }
  return found.sort((a, b) => a.id - b.id);
}

/**
 * After creating `created`: the id of the environment's one comment. When a racing reporter created one
 * too, the oldest is kept and the others deleted (a 404: the other reporter deleted it first); the kept
 * one shows this report unless it already shows a newer one.
 */
async function keepOldest(rest: GitHubRest, repo: string, report: PrReport, created: Comment) {
  const marked = await markedComments(rest, repo, report, false);
  // A listing that does not show our new comment yet still counts it.
  if (!marked.some((c) => c.id === created.id)) marked.push(created);
  if (marked.length === 1) return created.id;
  const [keep, ...extra] = marked.sort((a, b) => a.id - b.id) as [Comment, ...Comment[]];
  for (const c of extra)
    expect(
      await rest.request('DELETE', `${repo}/issues/comments/${c.id}`),
      [204, 404],
      'deleting a duplicate pull request comment',
    );
  const shown = versionOf(keep.body);
  if (keep.id !== created.id && !(shown && olderThan(report.version, shown)))
    expect(
      await rest.request('PATCH', `${repo}/issues/comments/${keep.id}`, { body: created.body }),
      [200],
      'updating the pull request comment',
    );
  return keep.id;
}

/** Our deployment of this environment at this commit: found, or created (never for a teardown). */
async function deployment(rest: GitHubRest, repo: string, report: PrReport): Promise<number | undefined> {
  const res = expect(
    await rest.request(
      'GET',
      `${repo}/deployments?environment=${enc(report.environment)}&sha=${enc(report.sha)}&per_page=${PAGE}`,
    ),
    [200],
    'listing deployments',
  );
  const ours = ((res.data ?? []) as { id: number; payload?: unknown }[]).find((d) => {
    const payload = typeof d.payload === 'string' ? safeJson(d.payload) : d.payload;
    return (payload as { previewOwner?: unknown } | undefined)?.previewOwner === report.ownerTag;
  });
  if (ours) return ours.id;
  if (report.state === 'inactive') return undefined;
  const created = expect(
    await rest.request('POST', `${repo}/deployments`, {
      ref: report.sha,
      environment: report.environment,
      description: `Preview of ${report.prNumber > 0 ? `pull request #${report.prNumber}` : 'the main branch'}`,
      transient_environment: true,
      production_environment: false,
      auto_merge: false,
      required_contexts: [],
      payload: { previewOwner: report.ownerTag },
    }),
    [201],
    'creating a deployment',
  );
  return (created.data as { id: number }).id;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** GitHub keeps 65535 characters of a check run's summary and of its text. */
const MAX_OUTPUT = 60_000;
const clip = (text: string) =>
  text.length > MAX_OUTPUT ? `${text.slice(0, MAX_OUTPUT)}\n\n…(truncated)` : text;

/** The body of a check run's POST or PATCH. */
export function checkRunBody(write: CheckRunWrite, create: boolean): Record<string, unknown> {
  return {
    ...(create ? { name: write.name, head_sha: write.sha } : {}),
    status: write.status,
    ...(write.status === 'completed'
      ? { conclusion: write.conclusion, completed_at: new Date().toISOString() }
      : {}),
    ...(write.detailsUrl ? { details_url: write.detailsUrl } : {}),
    external_id: write.externalId,
    output: {
      title: write.output.title.slice(0, 250),
      summary: clip(write.output.summary),
      ...(write.output.text ? { text: clip(write.output.text) } : {}),
    },
    ...(write.actions ? { actions: write.actions } : {}),
  };
}

/** Create a check run for the write's head commit: its id. */
export async function createCheckRun(rest: GitHubRest, write: CheckRunWrite): Promise<number> {
  const [owner, name] = write.repoFullName.split('/') as [string, string];
  const res = expect(
    await rest.request('POST', `/repos/${enc(owner)}/${enc(name)}/check-runs`, checkRunBody(write, true)),
    [201],
    'creating a check run',
  );
  return (res.data as { id: number }).id;
}

/**
 * The head's check run carrying `lookup.externalId`, if any: GitHub's list of the commit's check runs of
 * that name (every one, not only the latest: `filter=all`), page by page; of two carrying it, the oldest.
 */
export async function findCheckRun(rest: GitHubRest, lookup: CheckRunLookup): Promise<number | undefined> {
  const [owner, name] = lookup.repoFullName.split('/') as [string, string];
  const base = `/repos/${enc(owner)}/${enc(name)}/commits/${enc(lookup.sha)}/check-runs`;
  const query = `check_name=${enc(lookup.name)}&filter=all&per_page=${PAGE}`;
  let found: number | undefined;
  for (let page = 1; page <= 10; page++) {
    const res = expect(
      await rest.request('GET', `${base}?${query}&page=${page}`),
      [200],
      'listing the check runs of a commit',
    );
    const list = ((res.data as { check_runs?: unknown } | undefined)?.check_runs ?? []) as {
      id: number;
      external_id?: string | null;
    }[];
    for (const run of list)
      if (run.external_id === lookup.externalId && (found === undefined || run.id < found)) found = run.id;
    if (list.length < PAGE) break;
  }
  return found;
}

/** Update a check run. */
export async function updateCheckRun(rest: GitHubRest, id: number, write: CheckRunWrite): Promise<void> {
  const [owner, name] = write.repoFullName.split('/') as [string, string];
  expect(
    await rest.request(
      'PATCH',
      `/repos/${enc(owner)}/${enc(name)}/check-runs/${id}`,
      checkRunBody(write, false),
    ),
    [200],
    'updating a check run',
  );
}

/** A reply comment on a pull request (a refused `/preview` command). */
export async function replyComment(rest: GitHubRest, repoFullName: string, pr: number, body: string) {
  const [owner, name] = repoFullName.split('/') as [string, string];
  expect(
    await rest.request('POST', `/repos/${enc(owner)}/${enc(name)}/issues/${pr}/comments`, {
      body: body.slice(0, MAX_COMMENT),
    }),
    [201],
    'replying on the pull request',
  );
}
