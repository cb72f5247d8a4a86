/**
 * The dashboard at `/` of the local server: one static page that uses only the public API. The caller
 * pastes an API key (kept in the tab's sessionStorage, sent as `Authorization: Bearer`) and, optionally,
 * the client id and secret of the test and run routes; the page then polls `GET /v1/preview/environments`
 * (and `GET /run`) every two seconds and shows each environment's status, phase, URLs and failure cause,
 * and the recent test runs. Nothing is rendered as HTML from the API's answers: every value goes in as text.
 */
export function dashboardHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Preview environments</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2433; }
  header { background: #1d2433; color: #fff; padding: 12px 24px; display: flex; gap: 16px; align-items: center; }
  header h1 { font-size: 18px; margin: 0; flex: 1; }
  form { display: flex; gap: 8px; flex-wrap: wrap; }
  input { font: inherit; padding: 4px 8px; border-radius: 4px; border: 1px solid #8a93a6; min-width: 220px; }
  button { font: inherit; padding: 4px 12px; border-radius: 4px; border: 0; background: #3b6fe0; color: #fff; cursor: pointer; }
  main { padding: 16px 24px; }
  section { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px 16px; margin-bottom: 16px; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 6px 8px; border-top: 1px solid #eceff3; vertical-align: top; }
  th { font-size: 12px; text-transform: uppercase; color: #5d6678; border-top: 0; }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; }
  .ready, .passed { background: #1f8a4c; } .failed { background: #c33a32; } .torn_down { background: #7a8194; }
  .pending, .building, .deploying, .running { background: #c98a12; }
  .error { color: #c33a32; white-space: pre-wrap; max-width: 520px; }
  .muted { color: #5d6678; }
  #message { color: #c33a32; }
</style>
</head>
<body>
<header>
  <h1>Preview environments</h1>
  <form id="credentials">
    <input id="apiKey" type="password" placeholder="API key (pvk_…)" autocomplete="off" aria-label="API key">
    <input id="clientId" placeholder="client id (optional, for runs)" autocomplete="off" aria-label="client id">
    <input id="clientSecret" type="password" placeholder="client secret" autocomplete="off" aria-label="client secret">
    <button type="submit">Show</button>
  </form>
</header>
<main>
  <p id="message"></p>
  <section>
    <h2>Environments <span class="muted" id="updated"></span></h2>
    <table id="environments"><thead><tr><th>Repository</th><th>PR</th><th>Status</th><th>Phase</th><th>URLs</th><th>Cause</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Recent test runs</h2>
    <table id="runs"><thead><tr><th>Test</th><th>Status</th><th>Started</th><th>Source</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
const store = sessionStorage;
const $ = (id) => document.getElementById(id);
for (const k of ['apiKey', 'clientId', 'clientSecret']) $(k).value = store.getItem('preview.' + k) || '';
$('credentials').addEventListener('submit', (e) => {
  e.preventDefault();
  for (const k of ['apiKey', 'clientId', 'clientSecret']) store.setItem('preview.' + k, $(k).value.trim());
  refresh();
});
function cell(row, text, cls) {
  const td = row.insertCell();
  if (cls) { const span = document.createElement('span'); span.className = cls; span.textContent = text; td.append(span); }
  else td.textContent = text == null ? '' : String(text);
  return td;
}
function badge(status) { return 'badge ' + String(status).replace(/[^a-z_]/g, ''); }
async function refresh() {
  const apiKey = store.getItem('preview.apiKey');
  if (!apiKey) { $('message').textContent = 'Paste an API key to see your environments.'; return; }
  try {
    const res = await fetch('/v1/preview/environments', { headers: { authorization: 'Bearer ' + apiKey } });
    const body = await res.json();
    if (!res.ok) { $('message').textContent = body.error || ('HTTP ' + res.status); return; }
    $('message').textContent = '';
    const tbody = $('environments').tBodies[0];
    tbody.replaceChildren();
    for (const env of body.environments) {
      const row = tbody.insertRow();
      cell(row, env.repoFullName);
      cell(row, env.prNumber === 0 ? 'main' : '#' + env.prNumber);
      cell(row, env.status, badge(env.status));
      cell(row, env.phase || '');
      const urls = row.insertCell();
      for (const [app, url] of Object.entries(env.urls || {})) {
        const a = document.createElement('a');
        a.href = /^https?:\\/\\//.test(url) ? url : '#';
        a.textContent = app; a.target = '_blank'; a.rel = 'noopener';
        urls.append(a, ' ');
      }
      const cause = cell(row, env.error || '');
      cause.className = 'error';
    }
    if (body.environments.length === 0) cell(tbody.insertRow(), 'No environments yet.');
    $('updated').textContent = '· updated ' + new Date().toLocaleTimeString();
  } catch (err) { $('message').textContent = 'The API did not answer: ' + err.message; }
  const clientId = store.getItem('preview.clientId');
  const clientSecret = store.getItem('preview.clientSecret');
  if (!clientId || !clientSecret) return;
  try {
    const res = await fetch('/run?limit=10', { headers: { 'svc-client-id': clientId, 'svc-client-secret': clientSecret } });
    const runs = await res.json();
    const tbody = $('runs').tBodies[0];
    tbody.replaceChildren();
    if (!res.ok) { cell(tbody.insertRow(), runs.error || ('HTTP ' + res.status)); return; }
    for (const run of runs) {
      const row = tbody.insertRow();
      cell(row, run.name);
      cell(row, run.status, badge(run.status));
      cell(row, run.created_at);
      cell(row, (run.metadata && run.metadata.source) || '');
    }
  } catch (err) { $('message').textContent = 'The runs API did not answer: ' + err.message; }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
`;
}
