import { ensureFactorySecret } from '../../functions/core/scenarios/factory.js';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import { secretStore } from '../../functions/ports/registry.js';
import { bearer, call, linkRepo } from './api.js';
import { pollUntil, type Status } from './apps.js';
import { makeRepo } from './git.js';
import type { LocalServer } from './local-server.js';

/**
 * The fixtures of scenario data: an Environment Factory app and a web app that needs a signed-in user, both
 * apps of one preview. They share `SESSION_KEY` (preview.yaml `env`): the factory mints a session cookie
 * `<email>.<hmac>` for the first user of the recipe, the web app accepts only such a cookie.
 *
 * The factory (`factory.js`, app `factory`, path `/_preview/factory`):
 * - verifies `x-signature` (hex HMAC-SHA256 of the raw body with PREVIEW_FACTORY_SECRET): 401 otherwise;
 * - records every request it receives (verified or not), readable at `GET /_preview/received`;
 * - recipe `flaky`: answers `up` 503 the first two times for a testRunId, then as usual;
 * - recipe `refuse`: answers `up` 400 `{"error":"unknown model widgets"}`;
 * - recipe `bad-down`: answers `down` 400 `{"error":"cannot delete users"}`;
 * - a recipe whose `create.redirects` is `[{status, to}]`: answers `up` with that redirect;
 * - a recipe whose `create.cookieDomains` is `[{domain}]`: its session cookie names that domain;
 * - otherwise `up` answers `{auth: {cookies: [{name: 'session', value}], headers: {'x-run': testRunId}},
 *   refs: {email}}`; `down` answers 200 `{}`.
 *
 * The web app (`web.js`, app `web`): `/` shows "Signed in as <email>" in `#who` with a valid session cookie
 * (and the `x-run` header it received in `#run`), else 401 "Please sign in".
 */
export const FACTORY_JS = `
const http = require('node:http');
const crypto = require('node:crypto');
const secret = process.env.PREVIEW_FACTORY_SECRET || '';
const sessionKey = process.env.SESSION_KEY || '';
const received = [];
const attempts = {};
const verify = (raw, signature) => {
  if (!secret || typeof signature !== 'string') return false;
  const expected = crypto.createHmac('sha256', secret).update(raw).digest();
  const given = Buffer.from(signature, 'hex');
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
};
http.createServer((req, res) => {
  const json = (status, body) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)); };
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  if (req.url === '/_preview/received') return json(200, received);
  if (req.url !== '/_preview/factory' || req.method !== 'POST') return json(404, { error: 'not found' });
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    const verified = verify(raw, req.headers['x-signature']);
    let body = null;
    try { body = JSON.parse(raw.toString('utf8')); } catch {}
    received.push({ verified, signature: req.headers['x-signature'] || null, body });
    if (!verified) return json(401, { error: 'bad signature' });
    if (body.action === 'down')
      return body.scenario.name === 'bad-down' ? json(400, { error: 'cannot delete users' }) : json(200, {});
    const key = body.testRunId;
    attempts[key] = (attempts[key] || 0) + 1;
    if (body.scenario.name === 'flaky' && attempts[key] <= 2) return json(503, { error: 'warming up' });
    if (body.scenario.name === 'refuse') return json(400, { error: 'unknown model widgets' });
    if (body.create.redirects) {
      res.writeHead(body.create.redirects[0].status, { location: body.create.redirects[0].to });
      return res.end();
    }
    const email = body.create.users[0].email;
    const mac = crypto.createHmac('sha256', sessionKey).update(email).digest('hex');
    const cookie = { name: 'session', value: email + '.' + mac };
    if (body.create.cookieDomains) cookie.domain = body.create.cookieDomains[0].domain;
    json(200, {
      auth: { cookies: [cookie], headers: { 'x-run': body.testRunId } },
      refs: { email },
    });
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

export const WEB_JS = `
const http = require('node:http');
const crypto = require('node:crypto');
const sessionKey = process.env.SESSION_KEY || '';
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
const page = (title, body) => '<!doctype html><html><head><meta charset="utf-8"><title>' + title + '</title></head><body>' + body + '</body></html>';
const signedIn = (cookie) => {
  const m = /(?:^|;\\s*)session=([^;]+)/.exec(cookie || '');
  if (!m) return undefined;
  const value = decodeURIComponent(m[1]);
  const dot = value.lastIndexOf('.');
  const email = value.slice(0, dot);
  const mac = crypto.createHmac('sha256', sessionKey).update(email).digest('hex');
  return value.slice(dot + 1) === mac ? email : undefined;
};
http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  const email = signedIn(req.headers.cookie);
  res.writeHead(email ? 200 : 401, { 'content-type': 'text/html' });
  res.end(email
    ? page('Account', '<h1 id="who">Signed in as ' + esc(email) + '</h1><p id="run">' + esc(req.headers['x-run'] || '') + '</p>')
    : page('Sign in', '<h1 id="who">Please sign in</h1>'));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

export const FACTORY_PREVIEW_YAML = `apps:
  web:
    port: 3000
    command: node web.js
    health: /healthz
    env:
      SESSION_KEY: session-key-for-tests
  factory:
    port: 4000
    command: node factory.js
    health: /healthz
    env:
      SESSION_KEY: session-key-for-tests
factory:
  app: factory
  path: /_preview/factory
`;

/** A recipes file: `signed-in`, `flaky` and `refuse`, each creating one user with both tokens nested. */
export const recipesFile = () => {
  const recipe = (name: string) => ({
    name,
    description: `${name} user`,
    create: {
      users: [
        {
          _alias: 'u1',
          email: 'qa+{{testRunShortId}}@example.com',
          tags: ['run-{{testRunId}}', { deep: ['x-{{testRunShortId}}-y'] }],
        },
      ],
      sessions: [{ user: { _ref: 'u1' }, label: '{{testRunId}}/{{testRunShortId}}' }],
    },
    validation: { status: 'validated', method: 'endpoint-up-down', phase: 'ok' },
  });
  return {
    version: 1,
    source: { discoverPath: 'd.json', scenariosPath: 's.md' },
    validationMode: 'endpoint-lifecycle',
    recipes: [recipe('signed-in'), recipe('flaky'), recipe('refuse'), recipe('bad-down')],
  };
};

/** The fixture web and factory apps deployed as an application's main-branch environment (0), ready. */
export interface FactoryApp {
  repo: string;
  applicationId: string;
  setupId: string;
  main: Status;
  /** What the factory app received so far. */
  received(): Promise<{ verified: boolean; signature: string | null; body: any }[]>;
  importTest(over: Record<string, unknown>): Promise<string>;
}

/**
 * Deploy the fixture web and factory apps on a started local server as the main-branch environment (0)
 * of an application, with its factory secret and a setup's recipes uploaded (runs-suite.ts's
 * `factoryAppForFile` does it for a test file).
 */
export async function deployFactoryApp(
  server: Pick<LocalServer, 'url' | 'org' | 'gitRoot'>,
  repo = 'acme/factory',
): Promise<FactoryApp> {
  const { org } = server;
  makeRepo(server.gitRoot, repo, {
    'preview.yaml': FACTORY_PREVIEW_YAML,
    'web.js': WEB_JS,
    'factory.js': FACTORY_JS,
  });
  const applicationId = await linkRepo(org, repo);
  // What `previewctl apps create` does for every new application.
  await ensureFactorySecret(secretStore(), applicationId);
  const setupId = `setup-${Date.now().toString(36)}`;
  const up = await call(server, 'POST', `/v1/setup/setups/${setupId}/scenario-recipe-versions`, {
    headers: bearer(org),
    body: recipesFile(),
  });
  if (up.status !== 201) throw new Error(`recipes: ${up.status} ${up.text}`);
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
    setupId,
    main,
    received: async () => {
      const r = await fetch(`${main.urls.factory}/_preview/received`);
      return (await r.json()) as any;
    },
    importTest: async (over) => {
      const out = await importTests(org.orgId, [
        {
          name: 'Signed-in user sees the account',
          folder: { id: 'account', name: 'Account' },
          application_id: applicationId,
          application_version: { name: 'web', path: '/' },
          scenario: { setup_id: setupId, recipe: 'signed-in' },
          steps: [
            {
              interaction: 'assert-text',
              instruction: 'The page says "Signed in as qa+"',
              element: { html: '', selector: '#who' },
            },
          ],
          ...over,
        },
      ]);
      return out.tests[0]!.id;
    },
  };
}
