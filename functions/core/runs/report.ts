import {
  type LinkCheck,
  type LinkSigner,
  type MediaReader,
  REPORT_LINK_TTL_SECONDS,
} from '../../ports/media/port.js';
import { escapeHtml } from '../../shared/html.js';
import { readScenarioState } from '../scenarios/index.js';
import { environmentLine } from './environment.js';
import { loadRun, type RunItem } from './store.js';
import { TRACE_VIEWER_PATH } from './trace-viewer.js';
import { REFUSED_HINT } from './views.js';

/*
 * The run report: a page a person opens from the start-run response's `url` — the run's status, each
 * step with its output and screenshot, the video. The link is signed and expires (no credentials needed
 * to open it); the media URLs inside are minted when the page is served, valid one hour. While the run
 * is pending or running the page reloads itself every 2 seconds.
 */

/** The path of a run's report (the service serves it at `<base URL><path>?expires=…&sig=…`). */
export const reportPath = (runId: string): string => `/report/${encodeURIComponent(runId)}`;
const REPORT_PATH_RE = /^\/report\/([A-Za-z0-9_-]{1,64})$/;

/** Where the service serves the Playwright trace viewer (functions/core/trace-viewer.ts). */
export { TRACE_VIEWER_PATH };

/** The trace viewer opening the trace at `traceUrl` (a signed media URL), on the service's own origin. */
export const traceViewerLink = (baseUrl: string, traceUrl: string): string =>
  `${baseUrl}${TRACE_VIEWER_PATH}index.html?trace=${encodeURIComponent(traceUrl)}`;

/** A signed link to a run's report, valid `REPORT_LINK_TTL_SECONDS`. */
export async function reportLink(media: LinkSigner, baseUrl: string, runId: string): Promise<string> {
  const path = reportPath(runId);
  return `${baseUrl}${path}?${await media.signLink(path, REPORT_LINK_TTL_SECONDS)}`;
}

const STATUS_COLOURS: Record<string, string> = {
  passed: '#1a7f37',
  failed: '#cf222e',
  skipped: '#6e7781',
  pending: '#9a6700',
  running: '#0969da',
};

function badge(status: string): string {
  return `<span class="badge" style="background:${STATUS_COLOURS[status] ?? '#6e7781'}">${escapeHtml(status)}</span>`;
}

function duration(run: RunItem): string {
  const from = Date.parse(run.startedAt ?? run.createdAt);
  const to = run.endedAt ? Date.parse(run.endedAt) : undefined;
  return to !== undefined ? `${((to - from) / 1000).toFixed(1)} s` : '';
}

/** A step's console and network events, as lines under its output. */
function stepEventsHtml(s: RunItem['steps'][number]): string {
  const lines = [
    ...(s.console ?? []).map(
      (e) =>
        `<div class="ev ${e.level === 'warning' ? 'warn' : 'err'}">console ${escapeHtml(e.level)}: ${escapeHtml(e.text)}</div>`,
    ),
    ...(s.network ?? []).map(
      (e) => `<div class="ev err">network ${escapeHtml(e.status)}: ${escapeHtml(e.text)}</div>`,
    ),
    ...(s.eventsDropped ? [`<div class="ev">and ${s.eventsDropped} more</div>`] : []),
  ];
  return lines.length ? `<div class="events">${lines.join('')}</div>` : '';
}

/**
 * The report's HTML. `urls` holds the minted URL of each media key; `viewer`, when given, turns a trace
 * URL into its trace-viewer link (each step links there too: its actions are grouped under `step N`).
 */
export function renderRunReport(
  run: RunItem,
  urls: Map<string, string>,
  viewer?: (traceUrl: string) => string,
): string {
  const live = run.status === 'pending' || run.status === 'running';
  const traceUrl = run.traceKey && urls.get(run.traceKey);
  const traceLink = traceUrl && viewer ? viewer(traceUrl) : undefined;
  const rows = run.steps
    .map((s, i) => {
      const image = s.imageKey && urls.get(s.imageKey);
      return `<tr id="step-${i + 1}">
  <td class="n">${i + 1}</td>
  <td><div class="interaction">${escapeHtml(s.interaction)}</div><div>${escapeHtml(s.instruction)}</div>${
    s.element?.selector ? `<code>${escapeHtml(s.element.selector)}</code>` : ''
  }</td>
  <td>${badge(s.status)}${s.healed ? ` <span class="healed" title="the recorded selector matched nothing: the step acted on the element its recording describes">healed</span>` : ''}</td>
  <td><div class="output">${escapeHtml(s.output || '')}</div>${
    s.status !== 'pending' && s.status !== 'skipped' && s.url
      ? `<div class="url">${escapeHtml(s.url)}</div>`
      : ''
  }${stepEventsHtml(s)}${
    traceLink && s.status !== 'pending' && s.status !== 'skipped'
      ? `<div class="url"><a class="trace" href="${escapeHtml(traceLink)}" title="its actions are under &quot;step ${i + 1}&quot;">step ${i + 1} in the trace</a></div>`
      : ''
  }</td>
  <td>${image ? `<a href="${escapeHtml(image)}"><img src="${escapeHtml(image)}" alt="screenshot after step ${i + 1}"></a>` : ''}</td>
</tr>`;
    })
    .join('\n');
  const video = run.videoKey && urls.get(run.videoKey);
  const passedCount = run.steps.filter((s) => s.status === 'passed').length;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${live ? '<meta http-equiv="refresh" content="2">' : ''}
<meta name="robots" content="noindex">
<title>${escapeHtml(run.name)}: ${escapeHtml(run.status)}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1f2328;background:#f6f8fa}
h1{font-size:22px;margin:0 0 4px}.env{font-size:15px;font-weight:600;margin:0 0 4px}
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px;margin-bottom:16px}
.badge{color:#fff;border-radius:12px;padding:2px 10px;font-weight:600;font-size:12px;text-transform:uppercase}
.meta{color:#57606a}.meta span{margin-right:16px}
.error{color:#cf222e;font-weight:600;margin-top:8px;white-space:pre-wrap}
table{border-collapse:collapse;width:100%}th,td{border-top:1px solid #d0d7de;padding:8px;vertical-align:top;text-align:left}
th{font-size:12px;color:#57606a;text-transform:uppercase}
td.n{color:#57606a;width:24px}.interaction{font-weight:600}
.output{white-space:pre-wrap;word-break:break-word}.ev{font-size:12px;word-break:break-all}.ev.err{color:#cf222e}.ev.warn{color:#9a6700}.url{color:#57606a;font-size:12px;word-break:break-all}
.healed{font-size:12px;background:#fff8c5;color:#7d4e00;padding:1px 6px;border-radius:10px}
code{font-size:12px;background:#eff1f3;padding:1px 4px;border-radius:4px}
tr:target{background:#fff8c5}img{max-width:320px;border:1px solid #d0d7de;border-radius:4px}video{max-width:100%;border-radius:4px}
</style></head>
<body>
<div class="card">
<h1>${escapeHtml(run.name)} ${badge(run.status)}</h1>
${run.target?.environment ? `<div class="env" id="environment">${escapeHtml(environmentLine(run.target.environment))}</div>` : ''}
<div class="meta"><span>run ${escapeHtml(run.runId)}</span><span>folder ${escapeHtml(run.folder.name)}</span><span>source ${escapeHtml(run.source)}</span>
<span>started ${escapeHtml(run.startedAt ?? run.createdAt)}</span>${run.endedAt ? `<span>took ${duration(run)}</span>` : ''}
<span>${passedCount}/${run.steps.length} steps passed</span>${run.healedSteps ? `<span class="healed" id="healed-steps">${run.healedSteps} step${run.healedSteps === 1 ? '' : 's'} healed</span>` : ''}</div>
${run.targetUrl ? `<div class="meta">against ${escapeHtml(run.targetUrl)}</div>` : ''}
${scenarioLine(run)}
${attemptsHtml(run, urls, viewer)}
${run.status === 'failed' && run.error ? `<div class="error">${escapeHtml(run.error)}</div>` : ''}
${refusedHtml(run)}
</div>
<div class="card"><table>
<thead><tr><th>#</th><th>Step</th><th>Status</th><th>Output</th><th>Screenshot</th></tr></thead>
<tbody>
${rows}
</tbody></table></div>
${traceLink ? `<div class="card"><h2>Trace</h2><a id="trace" href="${escapeHtml(traceLink)}">Open the Playwright trace</a> (the DOM, network and console at each action) · <a href="${escapeHtml(traceUrl!)}">download trace.zip</a></div>` : ''}
${video ? `<div class="card"><h2>Video</h2><video controls preload="metadata" src="${escapeHtml(video)}"></video></div>` : ''}
</body></html>
`;
}

/** What serving a report answers. */
export interface ReportAnswer {
  status: number;
  contentType: string;
  body: string;
  /** The page's Content-Security-Policy header (see `reportCsp`). */
  csp: string;
}

/**
 * The report page's Content-Security-Policy: it runs no script, loads nothing but its own inline style and
 * the run's media, from the origins of the URLs minted for them (this server locally, the media bucket in
 * AWS), and may not be framed, submit forms or change its base URL. So text a step wrote into the page
 * (escaped anyway) could not load or run anything even if escaping ever failed.
 */
export function reportCsp(mediaUrls: Iterable<string> = []): string {
  const origins = new Set<string>();
  for (const u of mediaUrls) {
    try {
      const { origin } = new URL(u);
      if (origin !== 'null') origins.add(origin);
    } catch {
      // Not an absolute URL: nothing to allow.
    }
  }
  const media = origins.size ? [...origins].join(' ') : "'none'";
  return [
    "default-src 'none'",
    "style-src 'unsafe-inline'",
    `img-src ${media}`,
    `media-src ${media}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const errorPage = (status: number, message: string): ReportAnswer => ({
  status,
  contentType: 'text/html; charset=utf-8',
  csp: reportCsp(),
  body: `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${status}</title></head><body><p>${escapeHtml(message)}</p></body></html>\n`,
});

/**
 * Serve `GET /report/{run_id}?expires=…&sig=…` (no credentials: the signature is the authorization).
 * Steps: a path that is not a report's is 404; check the link (403 for a bad or missing signature, 410
 * once expired); load the run (404 when gone); mint its media URLs; render.
 */
export async function serveRunReport(
  media: MediaReader,
  req: { path: string; expires?: string; sig?: string; baseUrl: string },
): Promise<ReportAnswer> {
  const m = REPORT_PATH_RE.exec(req.path);
  if (!m) return errorPage(404, 'not found');
  const check: LinkCheck = await media.checkLink(req.path, req.expires, req.sig);
  if (check === 'forbidden') return errorPage(403, 'this link is not valid');
  if (check === 'expired') return errorPage(410, 'this link has expired: ask for a new one');
  const run = await loadRun(m[1]!);
  if (!run) return errorPage(404, 'run not found');
  const urls = new Map<string, string>();
  for (const key of [
    run.videoKey,
    run.traceKey,
    ...run.steps.map((s) => s.imageKey),
    ...(run.attempts ?? []).flatMap((a) => [a.videoKey, a.traceKey]),
  ])
    if (key && !urls.has(key)) urls.set(key, await media.url(key, req.baseUrl));
  return {
    status: 200,
    contentType: 'text/html; charset=utf-8',
    body: renderRunReport(run, urls, (traceUrl) => traceViewerLink(req.baseUrl, traceUrl)),
    csp: reportCsp(
      [
        run.videoKey,
        ...run.steps.map((s) => s.imageKey),
        ...(run.attempts ?? []).map((a) => a.videoKey),
      ].flatMap((k) => (k && urls.get(k)) || []),
    ),
  };
}

/**
 * A retried run's attempts: "passed on attempt 2 of 2 (flaky)", then each attempt's outcome
 * with its own video and trace. Nothing for a run of one attempt.
 */
export function attemptsHtml(
  run: Pick<RunItem, 'status' | 'attempts' | 'flaky'>,
  urls: Map<string, string>,
  viewer?: (traceUrl: string) => string,
): string {
  const attempts = run.attempts ?? [];
  if (attempts.length < 2) return '';
  const last = attempts[attempts.length - 1]!;
  const summary = `${run.status} on attempt ${last.number} of ${attempts.length}${run.flaky ? ' (flaky)' : ''}`;
  const items = attempts.map((a) => {
    const video = a.videoKey && urls.get(a.videoKey);
    const trace = a.traceKey && urls.get(a.traceKey);
    const links = [
      video ? `<a class="video" href="${escapeHtml(video)}">video</a>` : '',
      trace ? `<a class="trace" href="${escapeHtml(viewer ? viewer(trace) : trace)}">trace</a>` : '',
    ].filter(Boolean);
    return `<li>attempt ${a.number}: ${badge(a.status)}${a.error ? ` <span class="error">${escapeHtml(a.error)}</span>` : ''}${
      links.length ? ` ${links.join(' ')}` : ''
    }</li>`;
  });
  return `<div class="meta" id="attempts"><span>${escapeHtml(summary)}</span><ul>${items.join('')}</ul></div>`;
}

/** The run's scenario provisioning, one line: recipe, status, durations, errors. */
function scenarioLine(run: RunItem): string {
  const s = readScenarioState(run.scenarioState);
  if (!s) return '';
  const parts = [
    `scenario ${s.name} (setup ${s.setupId}${s.version !== undefined ? ` v${s.version}` : ''})`,
    s.status,
    `testRunId ${s.testRunId} / ${s.testRunShortId}`,
    ...(s.upMs !== undefined ? [`up ${s.upMs} ms`] : []),
    ...(s.downMs !== undefined ? [`down ${s.downMs} ms`] : []),
  ];
  const errors = [s.error, s.downError ? `down: ${s.downError}` : undefined].filter(Boolean) as string[];
  return `<div class="meta" id="scenario">${parts.map((p) => `<span>${escapeHtml(p)}</span>`).join('')}</div>${errors
    .map((e) => `<div class="error">${escapeHtml(e)}</div>`)
    .join('')}`;
}

/** The origins the run's page was refused without failing a step, with how to admit one; '' when none. */
export function refusedHtml(run: Pick<RunItem, 'refusedOrigins'>): string {
  if (!run.refusedOrigins?.length) return '';
  const origins = run.refusedOrigins.map((o) => `<code>${escapeHtml(o)}</code>`).join(' ');
  return `<div class="meta" id="refused-origins">Refused: ${origins}: ${escapeHtml(REFUSED_HINT)}</div>`;
}
