// The dashboard's script (inlined into the page by lib/local/dashboard.ts; runs in the browser, no
// framework). It calls the public API only, with the credentials the person gave: the API key for
// environments and logs, the client id and secret for tests and runs. Every value from the API goes into
// the page as text (textContent, never innerHTML).

const store = sessionStorage;
const $ = (id) => document.getElementById(id);
const FIELDS = ['apiKey', 'clientId', 'clientSecret'];
/** The environments of the last poll (the start form and the runs table name them). */
let environments = [];
let shownEnvs = '';
let shownRuns = '';
let testsLoaded = false;
/**
 * A protected environment's signed access links, by label: read from its status (`accessUrls`)
 * once per `updatedAt`, since the list carries none. Never the access key: the status has no such field.
 */
const accessLinks = new Map();
const accessPending = new Set();

for (const k of FIELDS) $(k).value = store.getItem(`preview.${k}`) || '';

function saveCredentials(values) {
  for (const k of FIELDS) {
    const v = String(values[k] ?? '').trim();
    $(k).value = v;
    store.setItem(`preview.${k}`, v);
  }
  testsLoaded = false;
  shownEnvs = '';
  shownRuns = '';
  refresh();
}

$('credentials').addEventListener('submit', (e) => {
  e.preventDefault();
  saveCredentials(Object.fromEntries(FIELDS.map((k) => [k, $(k).value])));
});
// The credentials file is read here, in the tab; nothing is sent anywhere but as the API's headers.
$('credentialsFile').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    const c = JSON.parse(await file.text());
    if (!c.apiKey) throw new Error('it has no apiKey');
    saveCredentials(c);
    say(`Loaded the credentials of organization ${c.orgId || '?'}.`);
  } catch (err) {
    say(`Could not read ${file.name}: ${err.message}`, true);
  }
  e.target.value = '';
});

function say(text, bad) {
  $('status').textContent = text;
  $('status').className = bad ? 'bad' : '';
}

function headersFor(auth) {
  if (auth === 'key') return { authorization: `Bearer ${store.getItem('preview.apiKey') || ''}` };
  return {
    'svc-client-id': store.getItem('preview.clientId') || '',
    'svc-client-secret': store.getItem('preview.clientSecret') || '',
  };
}

/** One call of the API: `{ ok, status, body }` (body parsed as JSON, or text for logs). */
async function api(auth, method, path, body) {
  const headers = headersFor(auth);
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = text;
  if ((res.headers.get('content-type') || '').startsWith('application/json')) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { ok: res.ok, status: res.status, body: parsed };
}
const errorOf = (res) => res.body?.error || `HTTP ${res.status}`;

const label = (env) => `${env.repoFullName} ${env.prNumber === 0 ? 'main' : `#${env.prNumber}`}`;
const envPath = (env) =>
  `/v1/preview/environments/${env.repoFullName.split('/').map(encodeURIComponent).join('/')}/${env.prNumber}`;
const short = (sha) => (sha ? String(sha).slice(0, 7) : '');

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const c of children) if (c !== undefined && c !== null) node.append(c);
  return node;
}
function badge(status) {
  return el('span', { className: `badge ${String(status).replace(/[^a-z_]/g, '')}`, textContent: status });
}
function timeEl(iso) {
  if (!iso) return '';
  const t = el('time', { dateTime: iso, textContent: new Date(iso).toLocaleString() });
  t.title = iso;
  return t;
}
function button(text, ariaLabel, onClick, className) {
  const b = el('button', { type: 'button', textContent: text, className: className || 'quiet' });
  b.setAttribute('aria-label', ariaLabel);
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await onClick();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/** Run an action's API call, say how it went, and show its effect at once. */
async function act(what, call) {
  say(`${what}…`);
  try {
    const res = await call();
    if (res.ok) say(`${what}: accepted.`);
    else say(`${what}: ${errorOf(res)}`, true);
  } catch (err) {
    say(`${what}: the API did not answer (${err.message})`, true);
  }
  shownEnvs = '';
  await refresh();
}

function appsOf(env) {
  const names = new Set([
    ...(env.apps || []),
    ...Object.keys(env.urls || {}),
    ...Object.keys(env.stoppedApps || {}),
  ]);
  return [...names].sort();
}

function renderEnvironments(list) {
  const tbody = $('environments').tBodies[0];
  tbody.replaceChildren();
  for (const env of list) {
    const row = tbody.insertRow();
    row.dataset.env = label(env);
    const live = env.status !== 'torn_down';
    row
      .insertCell()
      .append(
        el('strong', { textContent: env.repoFullName }),
        ' ',
        env.prNumber === 0 ? 'main' : `#${env.prNumber}`,
      );
    row
      .insertCell()
      .append(
        badge(env.status),
        env.phase ? el('div', { className: 'muted', textContent: env.phase }) : '',
        gateLine(env),
      );
    const commit = row.insertCell();
    if (env.lastDeployedSha) {
      const code = el('code', { textContent: short(env.lastDeployedSha) });
      code.title = env.lastDeployedSha;
      commit.append(code);
    } else commit.append(el('span', { className: 'muted', title: 'not deployed yet', textContent: '—' }));
    row.insertCell().append(timeEl(env.updatedAt));
    const apps = row.insertCell();
    for (const app of appsOf(env)) {
      const line = el('div', { className: 'app' });
      const url = env.urls?.[app];
      line.append(
        url && /^https?:\/\//.test(url)
          ? el('a', { className: 'name', href: url, target: '_blank', rel: 'noopener', textContent: app })
          : el('span', { className: 'name', textContent: app }),
      );
      // A protected app's way in: its signed link, which sets the access cookie and opens the app.
      const link = live ? accessLinks.get(label(env))?.links?.[app] : undefined;
      if (link && /^https?:\/\//.test(link)) {
        const open = el('a', {
          className: 'access',
          href: link,
          target: '_blank',
          rel: 'noopener',
          textContent: 'open (protected)',
          title: 'A signed link, good for 7 days: it lets this browser into the app.',
        });
        open.setAttribute('aria-label', `access link of ${app} in ${label(env)}`);
        line.append(open);
      }
      const logs = el('a', {
        href: `#logs/${env.repoFullName}/${env.prNumber}/${encodeURIComponent(app)}`,
        textContent: 'logs',
      });
      logs.setAttribute('aria-label', `logs of ${app} in ${label(env)}`);
      line.append(logs);
      // A failed environment's stopped app says why it is not running.
      const stopped = env.stoppedApps?.[app];
      if (stopped) line.append(el('span', { className: 'stopped error', textContent: stopped }));
      if (live) {
        for (const mode of ['restart', 'rebuild'])
          line.append(
            button(mode === 'restart' ? 'Restart' : 'Rebuild', `${mode} ${app} of ${label(env)}`, () =>
              act(`${mode === 'restart' ? 'Restart' : 'Rebuild'} of ${app} in ${label(env)}`, () =>
                api('key', 'PATCH', `${envPath(env)}/apps/${encodeURIComponent(app)}`, { mode }),
              ),
            ),
          );
      }
      apps.append(line);
    }
    const actions = el('div', { className: 'actions' });
    if (live) {
      actions.append(
        button('Redeploy', `redeploy ${label(env)}`, () =>
          act(`Redeploy of ${label(env)}`, () => api('key', 'PATCH', envPath(env))),
        ),
        button('Tear down', `tear down ${label(env)}`, () => confirmTeardown(env), 'danger'),
      );
    }
    row.insertCell().append(actions);
    const cause = row.insertCell();
    cause.className = 'error';
    cause.textContent = env.error || '';
  }
  if (list.length === 0) tbody.insertRow().insertCell().textContent = 'No environments yet.';
}

function confirmTeardown(env) {
  const dialog = $('confirm');
  $('confirmText').textContent =
    `Tear down ${label(env)}? Its apps stop and their URLs go away; a new deploy brings it back.`;
  dialog.returnValue = '';
  dialog.onclose = () => {
    if (dialog.returnValue === 'ok')
      act(`Tear down of ${label(env)}`, () => api('key', 'DELETE', envPath(env)));
  };
  dialog.showModal();
}

// Logs: the link `#logs/owner/repo/pr/app` opens them in a dialog (read with the API key).
let logsOf = null;
async function showLogs(source) {
  if (!logsOf) return;
  logsOf.source = source || logsOf.source;
  $('logsApp').setAttribute('aria-pressed', String(logsOf.source === 'app'));
  $('logsBuild').setAttribute('aria-pressed', String(logsOf.source === 'build'));
  $('logs-title').textContent =
    `${logsOf.source === 'build' ? 'Build output' : 'Output'} of ${logsOf.app} in ${logsOf.repo} ${logsOf.pr === '0' ? 'main' : `#${logsOf.pr}`}`;
  $('logsText').textContent = 'Loading…';
  try {
    const path = `/v1/preview/environments/${logsOf.repo.split('/').map(encodeURIComponent).join('/')}/${logsOf.pr}/apps/${encodeURIComponent(logsOf.app)}/logs?tail=200&source=${logsOf.source}`;
    const res = await api('key', 'GET', path);
    $('logsText').textContent = res.ok ? res.body || '(no output yet)' : errorOf(res);
  } catch (err) {
    $('logsText').textContent = `The API did not answer: ${err.message}`;
  }
}
function openLogsFromHash() {
  const m = /^#logs\/([^/]+\/[^/]+)\/(\d+)\/([^/]+)$/.exec(location.hash);
  if (!m) return;
  logsOf = { repo: decodeURIComponent(m[1]), pr: m[2], app: decodeURIComponent(m[3]), source: 'app' };
  if (!$('logs').open) $('logs').showModal();
  showLogs('app');
}
$('logsApp').addEventListener('click', () => showLogs('app'));
$('logsBuild').addEventListener('click', () => showLogs('build'));
$('logsRefresh').addEventListener('click', () => showLogs());
$('logsClose').addEventListener('click', () => $('logs').close());
$('logs').addEventListener('close', () => {
  logsOf = null;
  if (location.hash.startsWith('#logs/')) history.replaceState(null, '', location.pathname + location.search);
});
window.addEventListener('hashchange', openLogsFromHash);

// Starting a test: the tests of GET /test, against an environment (its environmentId) or the default.
function renderTargets() {
  const select = $('target');
  const chosen = select.value;
  const options = [
    el('option', { value: '', textContent: 'the main-branch environment (0) of its application' }),
  ];
  for (const env of environments)
    if (env.environmentId && env.status !== 'torn_down')
      options.push(el('option', { value: env.environmentId, textContent: `${label(env)} (${env.status})` }));
  select.replaceChildren(...options);
  select.value = options.some((o) => o.value === chosen) ? chosen : '';
}
async function loadTests() {
  const res = await api('client', 'GET', '/test');
  const select = $('test');
  if (!res.ok) {
    select.replaceChildren(el('option', { value: '', textContent: `(tests: ${errorOf(res)})` }));
    return;
  }
  const options = res.body.map((t) =>
    el('option', { value: t.id, textContent: `${t.name}${t.folder ? ` (${t.folder.name})` : ''}` }),
  );
  select.replaceChildren(
    ...(options.length
      ? options
      : [el('option', { value: '', textContent: '(no tests yet: previewctl tests import)' })]),
  );
  testsLoaded = true;
}
$('start').addEventListener('submit', async (e) => {
  e.preventDefault();
  const testId = $('test').value;
  if (!testId) return say('Pick a test first.', true);
  const target = $('target').value;
  const name = $('test').selectedOptions[0].textContent;
  say(`Starting ${name}…`);
  try {
    const res = await api('client', 'POST', `/test/${encodeURIComponent(testId)}/run`, {
      source: 'dashboard',
      ...(target ? { application_version_id: target } : {}),
    });
    if (!res.ok) return say(`Start of ${name}: ${errorOf(res)}`, true);
    say(`Started run ${res.body.run_id} of ${name}; its report is linked below.`);
    shownRuns = '';
    await refresh();
  } catch (err) {
    say(`Start of ${name}: the API did not answer (${err.message})`, true);
  }
});

function runEnvironment(run) {
  const e = run.environment;
  if (e?.repository)
    return `${e.repository} ${e.pr_number === 0 ? 'main' : `#${e.pr_number}`}${e.commit ? ` @ ${short(e.commit)}` : ''}`;
  const id = run.metadata?.application_version_id;
  const env = id && environments.find((x) => x.environmentId === id);
  return env ? label(env) : id || 'main-branch (0)';
}
function renderRuns(runs) {
  const tbody = $('runs').tBodies[0];
  tbody.replaceChildren();
  for (const run of runs) {
    const row = tbody.insertRow();
    row.insertCell().textContent = run.name;
    row
      .insertCell()
      .append(badge(run.status), run.error ? el('div', { className: 'error', textContent: run.error }) : '');
    row.insertCell().textContent = runEnvironment(run);
    row.insertCell().append(timeEl(run.created_at));
    row.insertCell().textContent = run.metadata?.source || '';
    const report = row.insertCell();
    if (run.report_url && /^https?:\/\//.test(run.report_url)) {
      const a = el('a', { href: run.report_url, target: '_blank', rel: 'noopener', textContent: 'report' });
      a.setAttribute('aria-label', `report of ${run.name}, run ${run.id}`);
      report.append(a);
    }
  }
  if (runs.length === 0) tbody.insertRow().insertCell().textContent = 'No runs yet.';
}

/**
 * Read the access links of the ready environments whose status changed since they were read (one status
 * read each), then draw the table again if any has links now.
 */
async function loadAccessLinks(list) {
  let changed = false;
  await Promise.all(
    list.map(async (env) => {
      const key = label(env);
      const seen = accessLinks.get(key);
      if (env.status !== 'ready' || Object.keys(env.urls || {}).length === 0) {
        if (seen) changed = accessLinks.delete(key) || changed;
        return;
      }
      if (seen?.at === env.updatedAt || accessPending.has(key)) return;
      accessPending.add(key);
      try {
        const res = await api('key', 'GET', envPath(env));
        if (!res.ok) return;
        const links = res.body.accessUrls;
        accessLinks.set(key, { at: env.updatedAt, links });
        if (links || seen?.links) changed = true;
      } finally {
        accessPending.delete(key);
      }
    }),
  );
  if (changed) renderEnvironments(shownEnvironments(environments));
}

/** What the poll itself last said (no key yet, an error): it goes once a poll succeeds; an action's stays. */
let pollSaid = '';
function sayPoll(text, bad) {
  pollSaid = text;
  say(text, bad);
}

async function refresh() {
  if (!store.getItem('preview.apiKey')) {
    sayPoll('Give an API key to see your environments.');
    return;
  }
  try {
    const res = await api('key', 'GET', '/v1/preview/environments');
    if (!res.ok) {
      sayPoll(errorOf(res), true);
    } else {
      if (pollSaid && $('status').textContent === pollSaid) say('');
      pollSaid = '';
      environments = res.body.environments;
      const json = JSON.stringify(environments);
      // Drawn again only when something changed, so a button is not replaced under the pointer.
      if (json !== shownEnvs) {
        shownEnvs = json;
        renderEnvironments(shownEnvironments(environments));
        renderTargets();
      }
      await loadAccessLinks(environments);
      $('updated').textContent = `· polled ${new Date().toLocaleTimeString()}`;
    }
    await refreshCommit();
  } catch (err) {
    sayPoll(`The API did not answer: ${err.message}`, true);
  }
  // The per-commit view shows that head's runs instead of the recent ones.
  if (commitOf) return;
  if (!store.getItem('preview.clientId') || !store.getItem('preview.clientSecret')) return;
  try {
    if (!testsLoaded) await loadTests();
    const res = await api('client', 'GET', '/run?limit=10');
    if (!res.ok) {
      renderRuns([]);
      $('runs').tBodies[0].rows[0].cells[0].textContent = errorOf(res);
      return;
    }
    const json = JSON.stringify(res.body.map((r) => [r.id, r.status, r.error, r.environment]));
    if (json !== shownRuns) {
      shownRuns = json;
      renderRuns(res.body);
    }
  } catch (err) {
    say(`The runs API did not answer: ${err.message}`, true);
  }
}

// The page starts (refresh(), openLogsFromHash(), the poll) in lib/local/dashboard.ts, after the
// per-commit view's script (dashboard-commit.js), which these functions call.
