import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  getApplication,
  type OrgCredentials,
  updateApplication,
} from '../../../functions/core/applications/applications.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { bearer, call, client, linkRepo } from '../../support/api.js';
import { pollUntil, type Status } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl } from '../../support/process.js';
import { runEnded } from '../../support/runs-app.js';

/*
 * Run confinement, end to end: a run reaches only its preview. Organization A's preview (apps `web` and
 * `api`) is a probe app that redirects, frames, opens, fetches and connects to whatever its query names;
 * organization B's preview holds a secret page; `elsewhere` (a server of this test on another loopback port)
 * stands for anything else. A probe that moves the page itself (a navigate step, a redirect of it, a
 * script's `location`) fails its step with `navigation to <scheme://host> is not allowed for this run`; the
 * page's own requests (an image, a fetch, a WebSocket, a frame, a popup) are refused just the same, said on
 * the step's network lines and the run's `refused_requests`, and the steps pass. Nothing of a target is in
 * the run's outputs or its report; B's app and `elsewhere` never receive a request.
 */

const PROBE_JS = `
const http = require('node:http');
const attr = (s) => String(s).replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
const js = (s) => JSON.stringify(String(s)).replace(/</g, '\\\\u003c');
http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const q = url.searchParams.get('u') || '';
  const html = (body) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<!doctype html><title>Probe</title><h1 id="home">Probe home</h1>' + body); };
  if (url.pathname === '/healthz') { res.writeHead(200); return res.end('ok'); }
  if (url.pathname === '/health-redirect') { res.writeHead(302, { location: process.env.REDIRECT_TO || '/' }); return res.end(); }
  if (url.pathname === '/go') { res.writeHead(302, { location: q }); return res.end(); }
  if (url.pathname === '/frame') return html('<iframe src="' + attr(q) + '"></iframe>');
  if (url.pathname === '/open') return html('<script>window.open(' + js(q) + ')</script>');
  if (url.pathname === '/fetch') return html('<p id="got"></p><script>fetch(' + js(q) + ').then((r) => r.text()).then((t) => { document.getElementById("got").textContent = t; })</script>');
  if (url.pathname === '/ws') return html('<script>new WebSocket(' + js(q) + ')</script>');
  if (url.pathname === '/img') return html('<img src="' + attr(q) + '">');
  if (url.pathname === '/move') return html('<script>location.href = ' + js(q) + '</script>');
  if (url.pathname === '/all') return html('<img src="' + attr(q + '/pixel.png') + '"><iframe src="' + attr(q + '/frame') + '"></iframe><script>fetch(' + js(q + '/data') + ').catch(() => {}); new WebSocket(' + js(q.replace(/^http/, 'ws') + '/socket') + '); window.open(' + js(q + '/popup') + ')</script>');
  html('');
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

const PROBE_YAML = `apps:
  web:
    port: 3000
    command: node probe.js
    health: /healthz
  api:
    port: 4000
    command: node probe.js
    health: /healthz
`;

const B_SECRET = 'b-org-page-secret-7d31c9';
const B_LOG_MARKER = 'b-org-log-marker-41f0aa';
/** Organization B's app: a page with its secret; every request counted, readable at /_hits. */
const OTHER_JS = `
const http = require('node:http');
let hits = 0;
console.log(${JSON.stringify(B_LOG_MARKER)});
http.createServer((req, res) => {
  if (req.url === '/_hits') return res.end(String(hits));
  if (req.url !== '/healthz') hits++;
  res.writeHead(200, { 'content-type': 'text/html', 'access-control-allow-origin': '*' });
  res.end('<h1>${B_SECRET}</h1>');
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

const ELSEWHERE_SECRET = 'elsewhere-secret-0b8e2f';
// The probe whose health check redirects fails after this long.
const h = localServerForFile({ env: { PREVIEW_READY_TIMEOUT_SECONDS: '4' } });
let applicationId: string;
let a: Status;
let b: Status;
let orgB: OrgCredentials;
let elsewhere: Server;
let elsewhereUrl: string;
const elsewhereHits: string[] = [];

async function deployMain(org: OrgCredentials, repo: string, files: Record<string, string>) {
  makeRepo(h.gitRoot, repo, files);
  const id = await linkRepo(org, repo);
  const res = await call(h, 'POST', `/v1/preview/applications/${id}/0`, { headers: bearer(org) });
  if (res.status !== 202) throw new Error(`deploy ${repo}: ${res.status} ${res.text}`);
  const status = await pollUntil(
    h,
    org,
    `/v1/preview/environments/${repo}/0`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  return { id, status };
}

beforeAll(async () => {
  elsewhere = createServer((req, res) => {
    elsewhereHits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<h1>${ELSEWHERE_SECRET}</h1>`);
  });
  elsewhere.on('upgrade', (req, socket) => {
    elsewhereHits.push(`upgrade ${req.url}`);
    socket.destroy();
  });
  await new Promise<void>((r) => elsewhere.listen(0, '127.0.0.1', () => r()));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
  const mainA = await deployMain(h.org, 'acme/probe', { 'preview.yaml': PROBE_YAML, 'probe.js': PROBE_JS });
  applicationId = mainA.id;
  a = mainA.status;
  const other = await h.newOrg('org-b');
  orgB = other;
  b = (
    await deployMain(other, 'beta/secret', {
      'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node other.js\n    health: /healthz\n',
      'other.js': OTHER_JS,
    })
  ).status;
  if (a.status !== 'ready' || b.status !== 'ready') throw new Error(`previews: ${JSON.stringify([a, b])}`);
}, 180_000);
afterAll(async () => {
  await new Promise((r) => elsewhere?.close(r));
}, 60_000);

/** What must never show up in a run of A: A's credentials, B's page and log, the control plane's API. */
const forbidden = () => [
  h.org.apiKey,
  h.org.clientSecret,
  B_SECRET,
  B_LOG_MARKER,
  ELSEWHERE_SECRET,
  '"openapi"',
  'Chromium', // chrome://version's page
];

/** Run a one-test probe: its steps, its runtime_metadata; the ended run and its report page. */
async function probe(name: string, steps: unknown[], metadata: Record<string, string> = {}) {
  const { id } = (
    await importTests(h.org.orgId, [
      {
        name,
        folder: { id: 'confinement', name: 'Confinement' },
        application_id: applicationId,
        application_version: { name: 'web', path: '/' },
        variables: { U: '/', P: 'x' },
        steps,
      },
    ])
  ).tests[0]!;
  const started = await call(h, 'POST', `/test/${id}/run`, {
    headers: client(h.org),
    body: { runtime_metadata: metadata },
  });
  expect(started.status).toBe(201);
  const run = await runEnded(h, started.body.run_id, 120_000);
  const report = await (await fetch(started.body.url)).text();
  return { run, report };
}

const navigate = (url: string) => ({ interaction: 'navigate', instruction: `Open ${url}`, url });
const waitHome = {
  interaction: 'assert-text',
  instruction: 'The probe page says "Probe home"',
  element: { html: '', selector: '#home' },
};
const refusedNav = (target: string) => `navigation to ${target} is not allowed for this run`;

/** A step's refused requests, as its network lines say them. */
const refusedLines = (run: any) =>
  run.steps.flatMap((s: any) =>
    (s.metadata?.network ?? []).filter((n: any) => n.status === 'refused').map((n: any) => n.text),
  );
const refusedReq = (kind: string, origin: string) =>
  `the page's ${kind} to ${origin} is not allowed for this run`;

describe("each probe is refused, naming only the origin: the page's own navigation fails its step, the page's requests are recorded", () => {
  const cases: [string, unknown[], string, Record<string, string>?][] = [];
  /** Probes whose steps pass: the refused requests (step lines) and the run's refused origins. */
  const passing: [string, unknown[], string[], string[]][] = [];
  let dataDir: string;
  let bLog: string;
  let cp: string;
  let bUrl: string;
  let results: Map<string, { run: any; report: string }>;

  beforeAll(async () => {
    dataDir = h.dataDir;
    cp = h.url;
    bUrl = b.urls.web!;
    // Organization B's raw app log, somewhere under the data dir.
    const logs = readdirSync(dataDir, { recursive: true, encoding: 'utf8' }).filter(
      (p) => p.includes(orgB.orgId) && p.endsWith('.log'),
    );
    bLog = join(dataDir, logs.find((p) => readFileSync(join(dataDir, p), 'utf8').includes(B_LOG_MARKER))!);
    const creds = join(dataDir, 'credentials.json');
    const go = (u: string) => navigate(`/go?u=${encodeURIComponent(u)}`);
    const at = (path: string, u: string) => [navigate(`${path}?u=${encodeURIComponent(u)}`), waitHome];
    cases.push(
      ['file: the data dir credentials', [navigate(`file://${creds}`)], refusedNav('file://')],
      ["file: another organization's log", [navigate(`file://${bLog}`)], refusedNav('file://')],
      ['chrome:', [navigate('chrome://version')], refusedNav('chrome://version')],
      ['view-source:', [navigate(`view-source:${bUrl}/`)], refusedNav('view-source:')],
      ['data:', [navigate('data:text/html,<h1>data</h1>')], refusedNav('data:')],
      ['javascript:', [navigate('javascript:document.body.innerHTML=1')], refusedNav('javascript:')],
      ["the control plane's port", [navigate(`${cp}/openapi.json`)], refusedNav(cp)],
      ["another organization's preview", [navigate(`${bUrl}/`)], refusedNav(bUrl)],
      [
        'link-local',
        [navigate('http://169.254.169.254/latest/meta-data/')],
        refusedNav('http://169.254.169.254'),
      ],
      // A variable substituted into a path: "/{{variable:P}}" with P=/127.0.0.1:<port>/… is //host.
      [
        'the //host trick',
        [navigate('/{{variable:P}}')],
        refusedNav(cp),
        { P: `/${cp.slice(7)}/openapi.json` },
      ],
      [
        'runtime_metadata overriding a URL',
        [navigate('{{variable:U}}')],
        refusedNav(bUrl),
        { U: `${bUrl}/` },
      ],
      ['302 to file:', [go(`file://${creds}`)], refusedNav('file://')],
      ['302 to chrome:', [go('chrome://version')], refusedNav('chrome://version')],
      ['302 to view-source:', [go(`view-source:${bUrl}/`)], refusedNav('view-source:')],
      ['302 to data:', [go('data:text/html,<h1>data</h1>')], refusedNav('data:')],
      ['302 to javascript:', [go('javascript:alert(1)')], refusedNav('javascript:')],
      ["302 to the control plane's port", [go(`${cp}/openapi.json`)], refusedNav(cp)],
      ["302 to another organization's preview", [go(`${bUrl}/`)], refusedNav(bUrl)],
      ['302 to link-local', [go('http://169.254.169.254/')], refusedNav('http://169.254.169.254')],
      [
        "a script moving the page to another organization's preview",
        [navigate(`/move?u=${encodeURIComponent(`${bUrl}/`)}`)],
        refusedNav(bUrl),
      ],
    );
    const ws = elsewhereUrl.replace('http:', 'ws:');
    passing.push(
      ['window.open', at('/open', `${bUrl}/`), [refusedReq('popup', bUrl)], [bUrl]],
      ['an iframe', at('/frame', `${elsewhereUrl}/`), [refusedReq('frame', elsewhereUrl)], [elsewhereUrl]],
      ['a fetch from the page', at('/fetch', `${cp}/openapi.json`), [refusedReq('fetch', cp)], [cp]],
      ['a WebSocket', at('/ws', `${ws}/socket`), [refusedReq('websocket', ws)], [ws]],
      [
        'an image',
        at('/img', 'http://169.254.169.254/latest/meta-data/'),
        [refusedReq('image', 'http://169.254.169.254')],
        ['http://169.254.169.254'],
      ],
      [
        'an image, a fetch, a WebSocket, an iframe and a popup on one page',
        at('/all', elsewhereUrl),
        ['image', 'frame', 'fetch', 'websocket', 'popup'].map((k) =>
          refusedReq(k, k === 'websocket' ? ws : elsewhereUrl),
        ),
        [elsewhereUrl, ws].sort(),
      ],
    );
    results = new Map();
    // Two at a time: each run is a browser and a video on a small machine.
    const all: [string, unknown[], Record<string, string>?][] = [
      ...cases.map(([name, steps, , md]): [string, unknown[], Record<string, string>?] => [name, steps, md]),
      ...passing.map(([name, steps]): [string, unknown[]] => [name, steps]),
    ];
    for (let i = 0; i < all.length; i += 2) {
      const batch = all.slice(i, i + 2);
      const done = await Promise.all(batch.map(([name, steps, md]) => probe(name, steps, md)));
      for (const [j, [name]] of batch.entries()) results.set(name, done[j]!);
    }
  }, 900_000);

  test("the page's own navigation: the step that met it failed with the refusal, and the run with it", () => {
    const seen = cases.map(([name]) => {
      const { run } = results.get(name)!;
      const failed = run.steps.findIndex((x: any) => x.status === 'failed');
      return [
        name,
        run.status,
        run.steps[failed]?.output,
        run.error?.replace(/^step \d+ \([a-z-]+\) failed: /, ''),
      ];
    });
    expect(seen).toEqual(cases.map(([name, , message]) => [name, 'failed', message, message]));
  });

  test("the page's requests: refused, each on its step's network lines and the run's refused origins; the steps passed", () => {
    const seen = passing.map(([name]) => {
      const { run } = results.get(name)!;
      return [
        name,
        run.status,
        run.steps.map((s: any) => s.status),
        [...refusedLines(run)].sort(),
        run.refused_requests?.origins,
        run.refused_requests?.hint.includes('allowedOrigins admits an origin'),
      ];
    });
    expect(seen).toEqual(
      passing.map(([name, , lines, origins]) => [
        name,
        'passed',
        ['passed', 'passed'],
        [...lines].sort(),
        origins,
        true,
      ]),
    );
  });

  test('a refused request is on the report page too', () => {
    const { run, report } = results.get('an image')!;
    expect(run.status).toBe('passed');
    expect(report).toContain('refused-origins');
    expect(report).toContain('http://169.254.169.254');
  });

  test("nothing of a target is in a run's outputs, page URLs or report; none was reached", async () => {
    for (const name of [...cases, ...passing].map(([n]) => n)) {
      const { run, report } = results.get(name)!;
      const text = JSON.stringify(run);
      for (const secret of forbidden()) {
        expect([name, 'run', text.includes(secret)]).toEqual([name, 'run', false]);
        expect([name, 'report', report.includes(secret)]).toEqual([name, 'report', false]);
      }
      // The screenshot was taken where the page stayed: never on the target.
      for (const s of run.steps.filter((x: any) => x.url))
        expect([
          name,
          /^(file|chrome|view-source|data|javascript):/.test(s.url) || s.url.startsWith(bUrl),
        ]).toEqual([name, false]);
    }
    expect(elsewhereHits).toEqual([]);
    expect(await (await fetch(`${bUrl}/_hits`)).text()).toBe('0');
  });
});

describe('what a run may reach', () => {
  test("the preview's own apps: both app URLs of the environment load", async () => {
    const { run } = await probe('Siblings', [navigate('/'), waitHome, navigate(`${a.urls.api}/`), waitHome]);
    expect(run.error).toBeUndefined();
    expect(run.steps.map((s: any) => s.status)).toEqual(['passed', 'passed', 'passed', 'passed']);
  }, 120_000);

  test('`previewctl apps update --allowed-origins`: validated, stored, listed; a bad one changes nothing', async () => {
    const update = (origins: string) =>
      previewctl(
        h.dataDir,
        'apps',
        'update',
        '--org',
        h.org.orgId,
        '--app',
        applicationId,
        '--allowed-origins',
        origins,
      );
    const ok = await update('https://Login.example.com/,https://cdn.example.com');
    expect([ok.code, ok.out.allowedOrigins]).toEqual([
      0,
      ['https://cdn.example.com', 'https://login.example.com'],
    ]);
    for (const [bad, message] of [
      [elsewhereUrl, 'is a loopback or link-local address'],
      ['http://169.254.169.254', 'is a loopback or link-local address'],
      ['https://login.example.com/callback', 'give only scheme://host[:port]'],
      ['file:///etc', 'is not an http: or https: origin'],
    ]) {
      const res = await update(bad!);
      expect([bad, res.code, res.out.error]).toEqual([bad, 2, expect.stringContaining(message!)]);
    }
    expect((await getApplication(h.org.orgId, applicationId)).allowedOrigins).toEqual([
      'https://cdn.example.com',
      'https://login.example.com',
    ]);
    const list = await previewctl(h.dataDir, 'apps', 'list', '--org', h.org.orgId);
    expect(list.out.applications.find((x: any) => x.applicationId === applicationId).allowedOrigins).toEqual([
      'https://cdn.example.com',
      'https://login.example.com',
    ]);
    expect((await update('')).out.allowedOrigins).toEqual([]);
    // Another organization's application: not found, nothing changed.
    await expect(updateApplication(orgB.orgId, applicationId, { allowedOrigins: [] })).rejects.toThrow(
      'application not found',
    );
  }, 60_000);
});

test('a health check answering 302 is not followed: the deploy fails naming the status and Location', async () => {
  const repo = 'acme/redirecting-health';
  makeRepo(h.gitRoot, repo, {
    'preview.yaml': `apps:\n  web:\n    port: 3000\n    command: node probe.js\n    health: /health-redirect\n    env:\n      REDIRECT_TO: ${elsewhereUrl}/health\n`,
    'probe.js': PROBE_JS,
  });
  const id = await linkRepo(h.org, repo);
  expect((await call(h, 'POST', `/v1/preview/applications/${id}/0`, { headers: bearer(h.org) })).status).toBe(
    202,
  );
  const status = await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${repo}/0`,
    (s) => s.status === 'ready' || s.status === 'failed',
    60_000,
  );
  expect(status.status).toBe('failed');
  expect(status.error).toContain(
    `GET /health-redirect answered 302, a redirect to ${elsewhereUrl}/health: not followed, the health path must answer 2xx itself`,
  );
  expect(elsewhereHits).toEqual([]);
}, 90_000);
