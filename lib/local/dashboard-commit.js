// The dashboard's per-commit view (inlined after dashboard-client.js, whose helpers it uses): the page
// opened at `/?env=<envKey>&commit=<sha>`, the link a check run's details_url gives locally, shows that
// environment alone and the merge gate of that head commit: the check run's state and title, what ended
// its story (a skip names who and why), and each run (test, status, duration, retries, report link),
// a quarantined failure marked. Read with the API key from GET …/{pr}/gate?commit=<sha>, every two seconds.

/** The view the address asks for: `{envKey, repo, pr, commit}`, `{bad}` for an address it cannot read, or null. */
const commitOf = (() => {
  const q = new URLSearchParams(location.search);
  const envKey = q.get('env');
  if (envKey === null) return null;
  const commit = (q.get('commit') || '').trim();
  const at = envKey.lastIndexOf('#');
  const repo = envKey.slice(0, at);
  const pr = envKey.slice(at + 1);
  if (at <= 0 || !/^[^/\s]+\/[^/\s]+$/.test(repo) || !/^\d+$/.test(pr))
    return { bad: `This address names no environment ("${envKey}"): expected owner/repo#number.` };
  return { envKey: envKey.toLowerCase(), repo, pr: Number(pr), commit };
})();
let shownCommit = '';

/** An environment's key as the gate and the address name it: `owner/repo#pr`, lower-cased. */
const envKeyOf = (env) => `${env.repoFullName.toLowerCase()}#${env.prNumber}`;
/** The per-commit view of an environment's head. */
const commitHref = (env, sha) => `/?${new URLSearchParams({ env: envKeyOf(env), commit: sha })}`;

/** The environments the page shows: in the per-commit view, only that one. */
// biome-ignore lint/correctness/noUnusedVariables: called by dashboard-client.js or the page's start (one inlined script)
function shownEnvironments(list) {
  return commitOf && !commitOf.bad ? list.filter((e) => envKeyOf(e) === commitOf.envKey) : list;
}

/** The merge gate of an environment's latest head, in its status cell: state, title, a link to its view. */
// biome-ignore lint/correctness/noUnusedVariables: called by dashboard-client.js or the page's start (one inlined script)
function gateLine(env) {
  const gate = env.gate;
  if (!gate) return '';
  const line = el('div', { className: 'gate' });
  line.append(
    el('span', { className: 'muted', textContent: 'Preview tests ' }),
    badge(gate.conclusion || gate.status),
    ' ',
  );
  const a = el('a', { href: commitHref(env, gate.headSha), textContent: gate.title });
  a.setAttribute('aria-label', `merge gate of ${label(env)} at ${short(gate.headSha)}: ${gate.title}`);
  line.append(a);
  return line;
}

const secondsOf = (ms) => (ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`);

function renderCommit(view) {
  const box = $('commitGate');
  const state = el('p', { className: 'gatestate' });
  state.append(
    badge(view.status),
    ' ',
    view.conclusion ? badge(view.conclusion) : '',
    ' ',
    el('strong', { id: 'commitTitle', textContent: view.title }),
  );
  const facts = el('p', { className: 'muted' });
  const sha = el('code', { textContent: view.sha });
  facts.append(`${view.repoFullName} #${view.prNumber} at `, sha);
  // Its story's check run on this head: a re-run, or a new deploy of the head, opens the next.
  if (view.story > 1) facts.append(` · check run ${view.story}`);
  if (view.completedAt) facts.append(' · completed ', timeEl(view.completedAt));
  const parts = [facts, state];
  const end = view.end;
  if (end?.kind === 'skipped')
    parts.push(
      el('p', {
        className: 'skip',
        id: 'commitSkip',
        textContent: `${end.by} skipped the tests of this commit: ${end.reason}. A skip completes the check run neutral, which is not a pass.`,
      }),
    );
  if (end?.kind === 'superseded') {
    const p = el('p', { className: 'muted', textContent: 'Superseded by a newer commit: ' });
    const env = { repoFullName: view.repoFullName, prNumber: view.prNumber };
    p.append(el('a', { href: commitHref(env, end.newerSha), textContent: short(end.newerSha) }));
    parts.push(p);
  }
  if (end?.kind === 'closed')
    parts.push(
      el('p', { className: 'muted', textContent: 'The pull request closed before the tests ended.' }),
    );
  if (end?.kind === 'preview-failed') parts.push(el('p', { className: 'error', textContent: end.error }));
  box.replaceChildren(...parts);

  const tbody = $('commitRuns').tBodies[0];
  tbody.replaceChildren();
  for (const run of view.runs) {
    const row = tbody.insertRow();
    row.dataset.test = run.name;
    row.insertCell().textContent = run.name;
    const status = row.insertCell();
    status.append(badge(run.status));
    if (run.flaky) status.append(' ', el('span', { className: 'tag', textContent: 'flaky' }));
    if (run.previewNeverAnswered)
      status.append(' ', el('span', { className: 'tag', textContent: 'preview never answered' }));
    if (run.quarantine) {
      const q = run.quarantine;
      status.append(
        ' ',
        el('span', { className: 'tag quarantined', textContent: 'quarantined' }),
        el('div', {
          className: 'muted',
          textContent: `${run.status === 'failed' ? 'Does not fail the gate. ' : ''}Owner ${q.owner}, until ${q.until.slice(0, 10)}: ${q.reason}`,
        }),
      );
    }
    // The run's error names its failed step already; a failed step without one says which it was.
    const why =
      run.error ||
      (run.failedStep ? `Step ${run.failedStep.number} (${run.failedStep.interaction}) failed` : '');
    if (why) status.append(el('div', { className: 'error', textContent: why }));
    row.insertCell().textContent = secondsOf(run.durationMs);
    row.insertCell().textContent = String(run.retries);
    const report = row.insertCell();
    if (run.reportUrl && /^https?:\/\//.test(run.reportUrl)) {
      const a = el('a', { href: run.reportUrl, target: '_blank', rel: 'noopener', textContent: 'report' });
      a.setAttribute('aria-label', `report of ${run.name}, run ${run.runId}`);
      report.append(a);
    } else report.append(el('code', { textContent: run.runId }));
  }
  if (view.runs.length === 0)
    tbody.insertRow().insertCell().textContent =
      view.status === 'queued' ? 'Waiting for the preview: no test has started yet.' : 'No test ran.';
}

/** Show the per-commit view's section and hide what it narrows away (called once the page loads). */
// biome-ignore lint/correctness/noUnusedVariables: called by dashboard-client.js or the page's start (one inlined script)
function openCommitView() {
  if (!commitOf) return;
  for (const id of ['start-title', 'runs-title']) $(id).closest('section').hidden = true;
  $('commitView').hidden = false;
  if (commitOf.bad) {
    $('commitGate').replaceChildren(el('p', { className: 'error', textContent: commitOf.bad }));
    return;
  }
  $('commit-title').textContent =
    `Merge gate of ${commitOf.repo} #${commitOf.pr}${commitOf.commit ? ` at ${short(commitOf.commit)}` : ''}`;
  document.title = `Preview tests · ${commitOf.repo} #${commitOf.pr}`;
}

/** Read the head's gate again and draw it when it changed. */
// biome-ignore lint/correctness/noUnusedVariables: called by dashboard-client.js or the page's start (one inlined script)
async function refreshCommit() {
  if (!commitOf || commitOf.bad) return;
  const path = `/v1/preview/environments/${commitOf.repo.split('/').map(encodeURIComponent).join('/')}/${commitOf.pr}/gate${commitOf.commit ? `?commit=${encodeURIComponent(commitOf.commit)}` : ''}`;
  const res = await api('key', 'GET', path);
  if (!res.ok) {
    shownCommit = '';
    $('commitGate').replaceChildren(el('p', { className: 'error', textContent: errorOf(res) }));
    $('commitRuns').tBodies[0].replaceChildren();
    return;
  }
  // Report links are signed afresh on each read: compared without them.
  const json = JSON.stringify({ ...res.body, runs: res.body.runs.map(({ reportUrl, ...r }) => r) });
  if (json !== shownCommit) {
    shownCommit = json;
    renderCommit(res.body);
  }
}
