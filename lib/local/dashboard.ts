import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { escapeHtml } from '../../functions/shared/html.js';

/**
 * The dashboard at `/` of the local server: one static page that acts through the public API only (no
 * route of its own, no private back door). The caller gives the organization's API key and, for tests and
 * runs, its client id and secret (typed, or read from the credentials file in the browser; kept in the
 * tab's sessionStorage). The page polls `GET /v1/preview/environments` and `GET /run` every two seconds and
 * shows each environment's status, phase, commit, last update, URLs and failure cause, with per-app logs
 * (`GET …/apps/{app}/logs`, in a dialog) and buttons that redeploy the environment (`PATCH …/{pr}`),
 * restart or rebuild one app (`PATCH …/apps/{app}`) and tear it down (`DELETE …/{pr}`, after a
 * confirmation); the recent runs with their report links (`report_url`); and a form that starts a test
 * (`GET /test`, `POST /test/{id}/run`) against an environment. Nothing is rendered as HTML from the API's
 * answers: every value goes in as text. The script is lib/local/dashboard-client.js, inlined.
 * `/?env=<envKey>&commit=<sha>` (a check run's details_url locally) opens the per-commit view
 * (lib/local/dashboard-commit.js): that environment alone and the merge gate of that head with its runs
 * (`GET …/{pr}/gate?commit=…`); each pull request's row shows its latest head's gate (the list's `gate`).
 */
export interface DashboardOptions {
  /** Locally: the file holding the first organization's credentials (`npm start` wrote it). */
  credentialsPath?: string;
  /** Locally: the data dir (other organizations' credentials are in its `orgs/`). */
  dataDir?: string;
}

const HERE = dirname(fileURLToPath(import.meta.url));
/** The page's script: the dashboard, then its per-commit view (`?env=…&commit=…`), then the start. */
const SCRIPTS = ['dashboard-client.js', 'dashboard-commit.js'];
const START = 'openCommitView();\nrefresh();\nopenLogsFromHash();\nsetInterval(refresh, 2000);\n';
let script: string | undefined;

/** Where the credentials are, said on the page (locally: the files previewctl reads them from too). */
function whereCredentials(opts: DashboardOptions): string {
  if (!opts.credentialsPath)
    return "Paste your organization's API key (and, for tests and runs, its client id and secret).";
  const orgs = opts.dataDir
    ? ` (other organizations: <code>${escapeHtml(join(opts.dataDir, 'orgs'))}/ORG.json</code>)`
    : '';
  return (
    `Running locally: the organization <code>npm start</code> created keeps its <code>apiKey</code>, ` +
    `<code>clientId</code> and <code>clientSecret</code> in <code>${escapeHtml(opts.credentialsPath)}</code>${orgs}, ` +
    'where <code>previewctl</code> finds them. Paste them here, or load that file (it is read in this tab, not uploaded).'
  );
}

export function dashboardHtml(opts: DashboardOptions = {}): string {
  script ??= [...SCRIPTS.map((f) => readFileSync(join(HERE, f), 'utf8')), START].join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Preview environments</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2433; }
  header { background: #1d2433; color: #fff; padding: 12px 24px; }
  header h1 { font-size: 18px; margin: 0 0 8px; }
  form.row { display: flex; gap: 8px; flex-wrap: wrap; align-items: center; }
  input, select { font: inherit; padding: 4px 8px; border-radius: 4px; border: 1px solid #8a93a6; }
  header input { min-width: 200px; }
  header label.file { color: #dfe4ee; font-size: 13px; }
  #where { color: #dfe4ee; margin: 8px 0 0; font-size: 13px; }
  #where code { color: #fff; }
  button { font: inherit; padding: 3px 10px; border-radius: 4px; border: 1px solid #2f5bc4; background: #3b6fe0; color: #fff; cursor: pointer; }
  button.quiet { background: #fff; color: #1d3f8f; border-color: #8a93a6; }
  button.danger { background: #b3261e; border-color: #8c1d17; }
  button:disabled { opacity: .5; cursor: default; }
  :focus-visible { outline: 3px solid #f0b429; outline-offset: 1px; }
  main { padding: 16px 24px; }
  section { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px 16px; margin-bottom: 16px; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 6px 8px; border-top: 1px solid #eceff3; vertical-align: top; }
  th { font-size: 12px; text-transform: uppercase; color: #5d6678; border-top: 0; }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: #5d6678; }
  .ready, .passed { background: #1f7a44; } .failed { background: #b3261e; } .torn_down { background: #6b7280; }
  .pending, .building, .deploying, .running, .queued, .in_progress { background: #94650a; }
  .success { background: #1f7a44; } .failure { background: #b3261e; } .neutral, .cancelled, .completed { background: #5d6678; }
  .gate { margin-top: 4px; font-size: 13px; max-width: 260px; }
  .tag { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 12px; border: 1px solid #8a93a6; color: #1d2433; }
  .tag.quarantined { border-color: #94650a; color: #6b4a07; background: #fff6e0; }
  .gatestate { font-size: 15px; margin: 4px 0 8px; }
  .skip { background: #eef1f6; border-left: 3px solid #5d6678; padding: 6px 10px; }
  .app { display: flex; gap: 6px; align-items: center; margin-bottom: 4px; white-space: nowrap; }
  .app .name { font-weight: 600; min-width: 3em; }
  .app .stopped { white-space: normal; font-size: 0.9em; }
  .app .access { font-size: 0.9em; }
  .actions { display: flex; gap: 6px; white-space: nowrap; }
  .error { color: #b3261e; white-space: pre-wrap; max-width: 420px; }
  .muted { color: #5d6678; }
  code { font-size: 12px; }
  #status { min-height: 1.5em; margin: 0 0 12px; }
  #status.bad { color: #b3261e; }
  dialog { border: 1px solid #8a93a6; border-radius: 6px; padding: 16px; max-width: min(960px, 92vw); }
  dialog::backdrop { background: rgba(29, 36, 51, .45); }
  dialog pre { background: #0f1420; color: #e4e8f0; padding: 12px; max-height: 60vh; overflow: auto; white-space: pre-wrap; word-break: break-word; font-size: 12px; }
  dialog menu { display: flex; gap: 8px; justify-content: flex-end; padding: 0; margin: 12px 0 0; }
</style>
</head>
<body>
<header>
  <h1>Preview environments</h1>
  <form id="credentials" class="row" aria-label="Credentials">
    <input id="apiKey" type="password" placeholder="API key (pvk_…)" autocomplete="off" aria-label="API key">
    <input id="clientId" placeholder="client id (pvc_…, for tests and runs)" autocomplete="off" aria-label="client id">
    <input id="clientSecret" type="password" placeholder="client secret" autocomplete="off" aria-label="client secret">
    <button type="submit">Show</button>
    <label class="file">or load credentials.json <input id="credentialsFile" type="file" accept="application/json,.json"></label>
  </form>
  <p id="where">${whereCredentials(opts)}</p>
</header>
<main>
  <p id="status" role="status" aria-live="polite"></p>
  <section id="commitView" aria-labelledby="commit-title" hidden>
    <h2 id="commit-title">Merge gate</h2>
    <p><a href="/">All environments and runs</a></p>
    <div id="commitGate" aria-live="polite"></div>
    <table id="commitRuns"><thead><tr><th scope="col">Test</th><th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Retries</th><th scope="col">Report</th></tr></thead><tbody></tbody></table>
  </section>
  <section aria-labelledby="envs-title">
    <h2 id="envs-title">Environments <span class="muted" id="updated"></span></h2>
    <table id="environments"><thead><tr><th scope="col">Environment</th><th scope="col">Status</th><th scope="col">Commit</th><th scope="col">Last update</th><th scope="col">Apps</th><th scope="col">Actions</th><th scope="col">Cause</th></tr></thead><tbody></tbody></table>
  </section>
  <section aria-labelledby="start-title">
    <h2 id="start-title">Start a test</h2>
    <form id="start" class="row">
      <label>Test <select id="test" required><option value="">(give the client id and secret)</option></select></label>
      <label>against <select id="target"><option value="">the main-branch environment (0) of its application</option></select></label>
      <button type="submit">Start run</button>
    </form>
  </section>
  <section aria-labelledby="runs-title">
    <h2 id="runs-title">Recent test runs</h2>
    <table id="runs"><thead><tr><th scope="col">Test</th><th scope="col">Status</th><th scope="col">Environment</th><th scope="col">Started</th><th scope="col">Source</th><th scope="col">Report</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<dialog id="logs" aria-labelledby="logs-title">
  <h2 id="logs-title">Logs</h2>
  <div class="actions">
    <button type="button" class="quiet" id="logsApp" aria-pressed="true">App output</button>
    <button type="button" class="quiet" id="logsBuild" aria-pressed="false">Build output</button>
    <button type="button" class="quiet" id="logsRefresh">Refresh</button>
  </div>
  <pre id="logsText" tabindex="0" aria-label="log lines"></pre>
  <menu><button type="button" id="logsClose">Close</button></menu>
</dialog>
<dialog id="confirm" aria-labelledby="confirm-title">
  <form method="dialog">
    <h2 id="confirm-title">Tear down?</h2>
    <p id="confirmText"></p>
    <menu><button value="cancel" class="quiet" autofocus>Cancel</button><button value="ok" class="danger" id="confirmOk">Tear down</button></menu>
  </form>
</dialog>
<script>
${script}
</script>
</body>
</html>
`;
}
