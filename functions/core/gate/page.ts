import { keys } from '../../manifest/tables.js';
import type { MediaReader } from '../../ports/media/port.js';
import { escapeHtml } from '../../shared/html.js';
import { reportLink } from '../runs/index.js';
import { type CommitView, commitView } from './views.js';

/*
 * The page a check run's `details_url` opens where the service serves no dashboard (AWS): one head
 * commit's merge gate, its state and title, what ended its story, and each run with its report link.
 * No credentials: the link is signed and expires, like a run report's (`/report/{run_id}`); the path
 * names the organization, so the signature is what admits a reader to it. The report links in the page
 * are minted when it is served.
 */

/** The page's path (links.ts `commitPagePath`): `/gate/{org_id}/{owner}/{repo}/{pr}/{sha}`. */
const PAGE_PATH_RE =
  /^\/gate\/([A-Za-z0-9_-]{1,64})\/([A-Za-z0-9-]{1,39})\/([A-Za-z0-9._-]{1,100})\/([1-9][0-9]{0,9})\/([0-9a-f]{40}|[0-9a-f]{64})$/;

/** What serving the page answers (as a run report's: status, HTML, its Content-Security-Policy). */
export interface CommitPageAnswer {
  status: number;
  contentType: string;
  body: string;
  csp: string;
}

/** No script, no media, no frame: the page's own style and links only. */
const CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const html = (status: number, title: string, body: string): CommitPageAnswer => ({
  status,
  contentType: 'text/html; charset=utf-8',
  csp: CSP,
  body: `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1f2328;background:#f6f8fa}
h1{font-size:20px;margin:0 0 4px}.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px;margin-bottom:16px}
.badge{color:#fff;border-radius:12px;padding:2px 10px;font-weight:600;font-size:12px;background:#6e7781}
.passed,.success{background:#1a7f37}.failed,.failure{background:#cf222e}.running,.pending,.queued,.in_progress{background:#9a6700}
.meta{color:#57606a}.title{font-size:16px;font-weight:600;margin:8px 0}.error{color:#cf222e;white-space:pre-wrap}
.tag{border:1px solid #9a6700;color:#7d4e00;background:#fff8c5;border-radius:4px;padding:0 6px;font-size:12px}
table{border-collapse:collapse;width:100%}th,td{border-top:1px solid #d0d7de;padding:8px;vertical-align:top;text-align:left}
th{font-size:12px;color:#57606a;text-transform:uppercase}code{font-size:12px}
</style></head>
<body>
${body}
</body></html>
`,
});

const badge = (status: string) =>
  `<span class="badge ${escapeHtml(status.replace(/[^a-z_]/g, ''))}">${escapeHtml(status)}</span>`;
const seconds = (ms: number | undefined) => (ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`);

function endHtml(view: CommitView): string {
  const end = view.end;
  switch (end?.kind) {
    case 'skipped':
      return `<p id="skip">Skipped by <strong>${escapeHtml(end.by)}</strong>: ${escapeHtml(end.reason)}</p>`;
    case 'superseded':
      return `<p class="meta">Superseded by a newer commit, <code>${escapeHtml(end.newerSha)}</code>.</p>`;
    case 'closed':
      return '<p class="meta">The pull request closed before the tests ended.</p>';
    case 'preview-failed':
      return `<p class="error">${escapeHtml(end.error)}</p>`;
    default:
      return '';
  }
}

/** The page of one head commit's gate. */
export function renderCommitPage(view: CommitView): string {
  const rows = view.runs
    .map((r) => {
      const marks = [
        r.flaky ? ' <span class="tag">flaky</span>' : '',
        r.previewNeverAnswered ? ' <span class="tag">preview never answered</span>' : '',
        r.quarantine
          ? ` <span class="tag">quarantined</span><div class="meta">${r.status === 'failed' ? 'Does not fail the gate. ' : ''}Owner ${escapeHtml(r.quarantine.owner)}, until ${escapeHtml(r.quarantine.until.slice(0, 10))}: ${escapeHtml(r.quarantine.reason)}</div>`
          : '',
      ].join('');
      const why =
        r.error ?? (r.failedStep ? `Step ${r.failedStep.number} (${r.failedStep.interaction}) failed` : '');
      return `<tr><td>${escapeHtml(r.name)}</td><td>${badge(r.status)}${marks}${why ? `<div class="error">${escapeHtml(why)}</div>` : ''}</td><td>${seconds(r.durationMs)}</td><td>${r.retries}</td><td>${r.reportUrl ? `<a href="${escapeHtml(r.reportUrl)}">report</a>` : `<code>${escapeHtml(r.runId)}</code>`}</td></tr>`;
    })
    .join('\n');
  return `<div class="card">
<h1>Preview tests of ${escapeHtml(view.repoFullName)} #${view.prNumber}</h1>
<div class="meta">commit <code>${escapeHtml(view.sha)}</code>${view.story > 1 ? ` · check run ${view.story}` : ''}${view.completedAt ? ` · completed ${escapeHtml(view.completedAt)}` : ''}</div>
<div class="title">${badge(view.status)} ${view.conclusion ? badge(view.conclusion) : ''} <span id="title">${escapeHtml(view.title)}</span></div>
${endHtml(view)}
</div>
<div class="card"><table>
<thead><tr><th>Test</th><th>Status</th><th>Duration</th><th>Retries</th><th>Report</th></tr></thead>
<tbody>
${rows || `<tr><td colspan="5">${view.status === 'queued' ? 'Waiting for the preview: no test has started yet.' : 'No test ran.'}</td></tr>`}
</tbody></table></div>`;
}

/**
 * Serve `GET /gate/{org_id}/{owner}/{repo}/{pr}/{sha}?expires=…&sig=…`. Steps: a path that is not a
 * page's is 404; check the link (403 for a bad or missing signature, 410 once expired); read the head's
 * view with fresh report links (404 when it has no check run); render.
 */
export async function serveCommitPage(
  media: MediaReader,
  req: { path: string; expires?: string; sig?: string; baseUrl: string },
): Promise<CommitPageAnswer> {
  const m = PAGE_PATH_RE.exec(req.path);
  if (!m) return html(404, 'Not found', '<p>not found</p>');
  const check = await media.checkLink(req.path, req.expires, req.sig);
  if (check === 'forbidden') return html(403, 'Forbidden', '<p>this link is not valid</p>');
  if (check === 'expired')
    return html(410, 'Expired', '<p>this link has expired: open the check run again</p>');
  const [, orgId, owner, repo, pr, sha] = m as unknown as [string, string, string, string, string, string];
  const envKey = keys.environments.envKey(`${owner}/${repo}`, Number(pr));
  const view = await commitView({ orgId, envKey }, sha, (runId) => reportLink(media, req.baseUrl, runId));
  if (!view) return html(404, 'Not found', '<p>this commit has no check run</p>');
  return html(200, `Preview tests: ${view.title}`, renderCommitPage(view));
}
