import { importTests } from '../../functions/core/test-definitions/definitions.js';
import { bearer, call, client, linkRepo } from './api.js';
import { pollUntil, type Status } from './apps.js';
import { makeRepo } from './git.js';
import type { LocalServer } from './local-server.js';

/**
 * The fixture app of the run tests: a form page and a result page (and a few pages that misbehave on
 * purpose). Plain node, no dependencies; `preview.yaml` runs it as the app `web`.
 *
 * - `/`: a sign-up form (`#email`, `#submit`), POSTing to `/result`
 * - `POST /result`: "Welcome, <email>" in `#greeting`, and a heading "Thanks for signing up"
 * - `/late`: a button that appears after 1.5 s (`#late`; `?ms=N`: after N ms)
 * - `/leak`: redirects to `/landing?token=<API_TOKEN>` (its secret), so the page URL carries a secret
 * - `/exit`: answers, then the app exits (the target going down mid-run)
 * - `/broken`: a button `#boom`; 2.5 s after a click the page logs a console error and its fetch of
 *   `/api/fail` is answered 500 (the planted failure behind each step's console and network lines)
 * - `/kinds`: a page changed since its steps were recorded (healing.test.ts): a save button whose classes
 *   changed inside new wrappers (a click shows a `role=status` notice), a search box with a new id,
 *   placeholder and attribute order (Enter shows `#results`), a link that became a button (`#show-more`),
 *   and two look-alike Delete buttons
 * - `/moved`: the bench's other kinds of change (healing.test.ts): a hint inserted before Add to cart,
 *   a Log in button before Sign up (its id renamed), Pricing reworded (its id renamed), the close button
 *   moved into a toolbar; a click on any says which in `#said`
 * - `/flaky?key=K`: "Not yet" the first time a key is asked for, "Ready" after (for retries that name flakes)
 */
export const RUNS_APP_JS = `
const http = require('node:http');
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
const page = (title, body) => '<!doctype html><html><head><meta charset="utf-8"><title>' + title +
  '</title><style>body{font:16px sans-serif;margin:40px}input,button{font-size:16px;padding:6px}</style></head><body>' +
  body + '</body></html>';
const seen = new Set();
http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const html = (status, title, body) => { res.writeHead(status, { 'content-type': 'text/html' }); res.end(page(title, body)); };
  if (url.pathname === '/healthz') { res.writeHead(200); return res.end('ok'); }
  if (url.pathname === '/' && req.method === 'GET')
    return html(200, 'Sign up', '<h1>Sign up</h1><form method="post" action="/result">' +
      '<label>Email <input id="email" name="email" type="text"></label> ' +
      '<button id="submit" type="submit">Sign up</button></form>');
  if (url.pathname === '/result' && req.method === 'POST') {
    let body = '';
    req.on('data', (c) => { body += c; });
    return req.on('end', () => {
      const email = new URLSearchParams(body).get('email') || '';
      html(200, 'Thanks', '<h1>Thanks for signing up</h1><p id="greeting">Welcome, ' + esc(email) + '</p>' +
        '<a id="home" href="/">Back</a>');
    });
  }
  if (url.pathname === '/late')
    return html(200, 'Late', '<h1>Wait for it</h1><script>setTimeout(() => { const b = document.createElement("button");' +
      ' b.id = "late"; b.textContent = "Here"; document.body.append(b); }, ' + (Number(url.searchParams.get('ms')) || 1500) + ');</script>');
  if (url.pathname === '/leak') {
    res.writeHead(302, { location: '/landing?token=' + encodeURIComponent(process.env.API_TOKEN || 'none') });
    return res.end();
  }
  if (url.pathname === '/landing') return html(200, 'Landing', '<h1>Landed</h1>');
  if (url.pathname === '/broken')
    return html(200, 'Broken', '<h1>Save</h1><button id="boom" onclick="setTimeout(() => {' +
      ' console.error(\\'planted console error\\'); fetch(\\'/api/fail\\'); }, 2500)">Save</button>');
  if (url.pathname === '/api/fail') { res.writeHead(500, { 'content-type': 'application/json' }); return res.end('{"error":"planted"}'); }
  if (url.pathname === '/flaky') {
    const key = url.searchParams.get('key') || '';
    const first = !seen.has(key);
    seen.add(key);
    return html(200, 'Flaky', '<h1 id="state">' + (first ? 'Not yet' : 'Ready') + '</h1>');
  }
  if (url.pathname === '/kinds')
    return html(200, 'Catalog', '<h1>Catalog</h1><div class="toolbar"><div class="group">' +
      '<button type="button" class="button-save main">Save draft</button></div></div><div id="notices"></div>' +
      '<input id="site-search" name="q" placeholder="Search all products" type="search"><p id="results"></p>' +
      '<button type="button" id="show-more">Show more</button><ul id="more-list"></ul>' +
      '<section><button type="button" class="danger">Delete</button></section>' +
      '<section><button type="button" class="danger">Delete</button></section><script>' +
      'const $ = (id) => document.getElementById(id);' +
      'document.querySelector(".button-save").onclick = () => { const d = document.createElement("div");' +
      ' d.className = "notice"; d.setAttribute("role", "status"); d.textContent = "Draft saved"; $("notices").append(d); };' +
      '$("show-more").onclick = () => { $("more-list").textContent = "More items"; };' +
      '$("site-search").onkeydown = (e) => { if (e.key === "Enter") $("results").textContent = "Results for " + e.target.value; };' +
      '</script>');
  if (url.pathname === '/moved')
    return html(200, 'Shop', '<h1>Shop</h1><div class="toolbar">' +
      '<button id="close" class="icon-btn" aria-label="Close dialog" type="button">×</button></div>' +
      '<form onsubmit="return false"><label for="first">First name</label>' +
      '<input id="first" name="first" class="field" placeholder="First name">' +
      '<div id="cart-slot"><p class="hint">Fields marked * are required.</p>' +
      '<button id="add" data-testid="add-to-cart" class="btn" type="button">Add to cart</button></div>' +
      '<div id="account"><button type="button" class="btn btn-secondary">Log in</button>' +
      '<button id="signup-v2" type="button" class="btn btn-primary">Sign up</button></div>' +
      '<a id="pricing-v2" class="nav-link" href="#pricing">Pricing plans</a><div id="dialog-slot"></div></form>' +
      '<p id="said"></p><script>document.querySelectorAll("button, a").forEach((b) => b.addEventListener("click", () => {' +
      ' document.getElementById("said").textContent = "Clicked " + (b.getAttribute("aria-label") || b.textContent); }));' +
      '</script>');
  if (url.pathname === '/exit') {
    html(200, 'Bye', '<h1>Going down</h1><a id="next" href="/">Next</a>');
    return setTimeout(() => process.exit(0), 100);
  }
  html(404, 'Not found', '<h1>Not found</h1>');
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

export const RUNS_APP_YAML = `apps:
  web:
    port: 3000
    command: node server.js
    health: /healthz
  api:
    port: 4000
    command: node server.js
    health: /healthz
`;

/** A step of a tests file. */
/** A step as a recorder writes it: the element's selector and its outer HTML when recorded (healing). */
export const recordedStep = (interaction: string, instruction: string, selector: string, html: string) => ({
  interaction,
  instruction,
  element: { selector, html },
});

/** The sign-up test's opening as recorded before the page renamed its ids (the healing tests). */
export const signUpBeforeRename = [
  { interaction: 'navigate', instruction: 'Open the sign-up page', url: '/' },
  recordedStep(
    'input-text',
    'Type {{variable:EMAIL}} into the email field',
    '#user-email',
    '<input id="user-email" name="email" type="text">',
  ),
  recordedStep(
    'click',
    'Click Sign up',
    '#signup-button',
    '<button id="signup-button" type="submit">Sign up</button>',
  ),
];

export const step = (
  interaction: string,
  instruction: string,
  extra: { url?: string; selector?: string } = {},
) => ({
  interaction,
  instruction,
  ...(extra.url !== undefined ? { url: extra.url } : {}),
  ...(extra.selector !== undefined ? { element: { html: '', selector: extra.selector } } : {}),
});

/** The passing test: navigate, input-text with a variable, click, assert-text. */
export const signUpSteps = [
  step('navigate', 'Open the sign-up page', { url: '/' }),
  step('input-text', 'Type {{variable:EMAIL}} into the email field', { selector: '#email' }),
  step('click', 'Click Sign up', { selector: '#submit' }),
  step('assert-text', 'The page says "Welcome, {{variable:EMAIL}}"', { selector: '#greeting' }),
];

/** The fixture app deployed as an application's main-branch environment (0), ready. */
export interface RunsApp {
  repo: string;
  applicationId: string;
  /** The main-branch environment (0), ready. */
  main: Status & { environmentId?: string };
  /** Import one test of the fixture's application; returns its id. */
  importTest(over: Record<string, unknown>): Promise<string>;
}

/**
 * Deploy the fixture app on a started local server (runs-suite.ts's `runsAppForFile` does it for a test
 * file): its repository written under the server's git root, an application linked to it (with `secrets`
 * for its `web` app, if given), the main-branch environment (0) deployed through the local pipeline and
 * waited for until ready.
 */
export async function deployRunsApp(
  server: Pick<LocalServer, 'url' | 'org' | 'gitRoot'>,
  opts: { repo?: string; secrets?: Record<string, string> } = {},
): Promise<RunsApp> {
  const repo = opts.repo ?? 'acme/signup';
  const { org } = server;
  makeRepo(server.gitRoot, repo, { 'preview.yaml': RUNS_APP_YAML, 'server.js': RUNS_APP_JS });
  const applicationId = await linkRepo(org, repo);
  if (opts.secrets) {
    const put = await call(server, 'PUT', `/v1/preview/secrets/${applicationId}/web`, {
      headers: bearer(org),
      body: { items: Object.entries(opts.secrets).map(([key, value]) => ({ key, value })) },
    });
    if (put.status !== 200) throw new Error(`secrets: ${put.status} ${put.text}`);
  }
  const res = await call(server, 'POST', `/v1/preview/applications/${applicationId}/0`, {
    headers: bearer(org),
  });
  if (res.status !== 202) throw new Error(`main-branch deploy: ${res.status} ${res.text}`);
  const main = await pollUntil(
    server,
    org,
    `/v1/preview/environments/${repo}/0`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  if (main.status !== 'ready') throw new Error(`main-branch environment: ${JSON.stringify(main)}`);
  return {
    repo,
    applicationId,
    main,
    importTest: async (over) => {
      const out = await importTests(org.orgId, [
        {
          name: 'Sign up works',
          folder: { id: 'signup', name: 'Sign up' },
          application_id: applicationId,
          application_version: { name: 'web', path: '/' },
          variables: { EMAIL: 'saved@example.com' },
          steps: signUpSteps,
          ...over,
        },
      ]);
      return out.tests[0]!.id;
    },
  };
}

/** Poll a run until it ends (passed or failed). */
export async function runEnded(
  h: Pick<LocalServer, 'url' | 'org'>,
  runId: string,
  timeoutMs = 90_000,
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  let last: any;
  while (Date.now() < deadline) {
    const res = await call(h, 'GET', `/run/${runId}?steps=true&media=true`, { headers: client(h.org) });
    last = res.body;
    if (res.status === 200 && (last.status === 'passed' || last.status === 'failed')) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`run ${runId} did not end; last ${JSON.stringify(last)}`);
}
