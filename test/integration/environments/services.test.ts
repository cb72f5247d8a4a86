// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${services.<name>.url}` syntax, not JS templates
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { updateApplication } from '../../../functions/core/applications/applications.js';
import { socketDir } from '../../../functions/ports/runtime/local/services.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { alive, pollUntil, settled } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * A database per preview: `services:` of preview.yaml through `npm start`'s server. The apps reach their
 * Postgres and Redis through `${services.<name>.url}` with Debian's own clients (psql, redis-cli), so
 * what is checked is the URL an app gets, as an app uses it.
 */

/**
 * `/pg?sql=…` runs SQL through psql and answers its rows; `/redis?cmd=…` runs a redis-cli command; `/url`
 * prints its URLs to its output (what masking must catch). `migrate.js` and `seed.js` record each run in
 * the database itself.
 */
const APP_JS = `
const http = require('node:http');
const { execFileSync } = require('node:child_process');
const run = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  try {
    if (u.pathname === '/healthz') return res.end('ok');
    if (u.pathname === '/pg') return res.end(run('psql', [process.env.DATABASE_URL, '-At', '-c', u.searchParams.get('sql')]));
    if (u.pathname === '/redis') return res.end(run('redis-cli', ['--no-auth-warning', '-u', process.env.REDIS_URL, ...u.searchParams.get('cmd').split(' ')]));
    if (u.pathname === '/url') { console.log('connecting to', process.env.DATABASE_URL, process.env.REDIS_URL); return res.end('printed'); }
  } catch (err) { res.writeHead(500); return res.end(String(err.stderr || err.message)); }
  res.writeHead(404); res.end();
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
const MIGRATE_JS = `
const { execFileSync } = require('node:child_process');
if (process.env.FAIL_MIGRATE) { console.log('migration 2 failed: relation "nope" does not exist', process.env.DATABASE_URL); process.exit(3); }
execFileSync('psql', [process.env.DATABASE_URL, '-c', "CREATE TABLE IF NOT EXISTS notes (body text); CREATE TABLE IF NOT EXISTS runs (what text); INSERT INTO runs VALUES ('migrate')"], { stdio: 'inherit' });
`;
const SEED_JS = `
const { execFileSync } = require('node:child_process');
execFileSync('psql', [process.env.DATABASE_URL, '-c', "INSERT INTO runs VALUES ('seed'); INSERT INTO notes VALUES ('seeded')"], { stdio: 'inherit' });
`;

const yaml = (extraEnv = '', from = '') => `services:
  db:
    kind: postgres
    version: "16"
    seed: node seed.js${from}
  cache:
    kind: redis
    version: "7"
apps:
  api:
    port: 3000
    command: node app.js
    health: /healthz
    migrate: node migrate.js
    env:
      DATABASE_URL: \${services.db.url}
      REDIS_URL: \${services.cache.url}${extraEnv}
`;
const FILES = { 'app.js': APP_JS, 'migrate.js': MIGRATE_JS, 'seed.js': SEED_JS };

const h = localServerForFile({ env: { PREVIEW_READY_TIMEOUT_SECONDS: '30' } });

async function deploy(repo: string, sha: string, pr = 1) {
  await linkRepo(h.org, repo);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: pr, headSha: sha, headRef: `feature-${pr}` },
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  return pollUntil(h, h.org, `/v1/preview/environments/${repo}/${pr}`, settled, 90_000);
}

async function ask(url: string, path: string): Promise<string> {
  const res = await fetch(new URL(path, url), { signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${res.status}: ${text}`);
  return text;
}
const sql = (url: string, q: string) => ask(url, `/pg?sql=${encodeURIComponent(q)}`);

/** Every file under `dir`, as text (what a password must never be in). */
function allText(dir: string): string {
  if (!existsSync(dir)) return '';
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(log|json)$/.test(e.name))
    .map((e) => readFileSync(join(e.parentPath, e.name), 'utf8'))
    .join('\n');
}

describe('services: a database per preview', () => {
  test('postgres and redis through their URLs; seed once, migrate per commit; status; teardown drops the data', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/db', { 'preview.yaml': yaml(), ...FILES });
    const first = await deploy('acme/db', sha);
    expect(first as unknown).toMatchObject({
      status: 'ready',
      services: { db: { kind: 'postgres', status: 'ready' }, cache: { kind: 'redis', status: 'ready' } },
    });
    const url = first.urls.api!;
    expect(await sql(url, 'SELECT what FROM runs ORDER BY ctid')).toBe('migrate\nseed');
    await sql(url, "INSERT INTO notes VALUES ('mine')");
    expect(await ask(url, '/redis?cmd=SET k v1')).toBe('OK');
    expect(await ask(url, '/redis?cmd=GET k')).toBe('v1');

    // A new commit: migrate again, no seed; the data stays.
    const next = commitFiles(h.gitRoot, 'acme/db', { 'app.js': `${APP_JS}\n// v2\n` });
    const second = await deploy('acme/db', next);
    expect(second.status).toBe('ready');
    expect(await sql(second.urls.api!, 'SELECT what FROM runs ORDER BY ctid')).toBe('migrate\nseed\nmigrate');
    expect(await sql(second.urls.api!, 'SELECT body FROM notes ORDER BY ctid')).toBe('seeded\nmine');
    expect(await ask(second.urls.api!, '/redis?cmd=GET k')).toBe('v1');

    // The credentials: in no response, no log line, no file the runtime writes (the app printed them).
    expect(await ask(second.urls.api!, '/url')).toBe('printed');
    const password = /postgres:\/\/preview:([^@]+)@/.exec(
      readFileSync(join(h.dataDir, 'runtime', 'state.json'), 'utf8'),
    );
    expect(password).toBeNull();
    const logs = await call(h, 'GET', '/v1/preview/environments/acme/db/1/apps/api/logs', {
      headers: bearer(h.org),
    });
    expect(logs.status).toBe(200);
    expect(logs.text).toMatch(/connecting to postgres:\/\/preview:\[secret\]@127\.0\.0\.1:\d+\/preview/);
    expect(logs.text).toMatch(/redis:\/\/default:\[secret\]@127\.0\.0\.1:\d+\/0/);
    const text = `${JSON.stringify(second)}${h.logs.join('\n')}${allText(join(h.dataDir, 'runtime'))}`;
    expect(text).not.toMatch(/postgres:\/\/preview:(?!\[secret\])/);
    expect(text).not.toMatch(/redis:\/\/default:(?!\[secret\])/);

    // Teardown: the services' directories and their socket directories are gone.
    const servicesDir = join(h.dataDir, 'runtime', 'services', h.org.orgId, 'acme', 'db', '1');
    expect(readdirSync(servicesDir).sort()).toEqual(['cache', 'db']);
    const sockets = ['db', 'cache'].map((s) =>
      socketDir(join(h.dataDir, 'runtime'), `${h.org.orgId}/acme/db/1`, s),
    );
    expect(sockets.map((d) => readdirSync(d).filter((f) => !f.endsWith('.lock')))).toEqual([
      [expect.stringMatching(/^\.s\.PGSQL\.\d+$/)],
      ['redis.sock'],
    ]);
    const down = await call(h, 'DELETE', '/v1/preview/environments/acme/db/1', { headers: bearer(h.org) });
    expect(down.status).toBe(202);
    const gone = await pollUntil(
      h,
      h.org,
      '/v1/preview/environments/acme/db/1',
      (s) => s.status === 'torn_down',
      60_000,
    );
    expect((gone as { services?: unknown }).services).toBeUndefined();
    expect(existsSync(servicesDir)).toBe(false);
    for (const dir of sockets) expect(existsSync(dir)).toBe(false);
  }, 300_000);

  test('a sleeping preview stops its services; woken, its rows and keys are there', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/sleepy', { 'preview.yaml': yaml(), ...FILES });
    // Asleep after 1.5 s without a request.
    const applicationId = await linkRepo(h.org, 'acme/sleepy');
    await updateApplication(h.org.orgId, applicationId, { sleepAfterMinutes: 0.025 });
    const first = await deploy('acme/sleepy', sha);
    expect(first.status).toBe('ready');
    // Its URL is the front door's: each request wakes it if it fell asleep meanwhile.
    const url = first.urls.api!;
    await sql(url, "INSERT INTO notes VALUES ('before sleeping')");
    expect(await ask(url, '/redis?cmd=SET k kept')).toBe('OK');
    const state = () => JSON.parse(readFileSync(join(h.dataDir, 'runtime', 'state.json'), 'utf8'));
    const id = `${h.org.orgId}/acme/sleepy/1`;
    const pids = ['db', 'cache'].map((s) => state().envs[id].services[s].pid as number);
    for (const pid of pids) expect(alive(pid)).toBe(true);

    const path = '/v1/preview/environments/acme/sleepy/1';
    const asleep = await pollUntil(h, h.org, path, (s: any) => s.phase === 'asleep', 30_000);
    expect(asleep as unknown).toMatchObject({
      services: { db: { kind: 'postgres', status: 'asleep' }, cache: { kind: 'redis', status: 'asleep' } },
    });
    for (const pid of pids) expect(alive(pid)).toBe(false);

    // The next request wakes it: the servers start again on the data they held.
    expect(await sql(url, 'SELECT body FROM notes ORDER BY ctid')).toBe('seeded\nbefore sleeping');
    expect(await ask(url, '/redis?cmd=GET k')).toBe('kept');
    const woken = (await call(h, 'GET', path, { headers: bearer(h.org) })).body;
    expect(woken.phase).toBeUndefined();
    expect(woken.services).toMatchObject({ db: { status: 'ready' }, cache: { status: 'ready' } });
    const again = ['db', 'cache'].map((s) => state().envs[id].services[s].pid as number);
    for (const [i, pid] of again.entries()) {
      expect(pid).not.toBe(pids[i]);
      expect(alive(pid)).toBe(true);
    }
  }, 300_000);

  test('a failing migrate fails the deploy with its command, exit code and output, the URL masked', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/bad', {
      'preview.yaml': yaml('\n      FAIL_MIGRATE: "1"'),
      ...FILES,
    });
    const status = await deploy('acme/bad', sha);
    expect(status.status).toBe('failed');
    expect(status.error).toContain('app api: migrate `node migrate.js` failed (exit code 3)');
    expect(status.error).toContain(
      'migration 2 failed: relation "nope" does not exist postgres://preview:[secret]@',
    );
  }, 300_000);

  test("from: main copies main's rows; its own writes stay its own; two previews never share data", async () => {
    const sha = makeRepo(h.gitRoot, 'acme/copy', { 'preview.yaml': yaml('', '\n    from: main'), ...FILES });
    const applicationId = await linkRepo(h.org, 'acme/copy');
    const res = await call(h, 'POST', `/v1/preview/applications/${applicationId}/0`, {
      headers: bearer(h.org),
    });
    expect(res.status).toBe(202);
    const main = await pollUntil(h, h.org, '/v1/preview/environments/acme/copy/0', settled, 90_000);
    expect(main.status).toBe('ready');
    await sql(main.urls.api!, "INSERT INTO notes VALUES ('from main')");

    const one = await deploy('acme/copy', sha, 1);
    const two = await deploy('acme/copy', sha, 2);
    expect([one.status, two.status]).toEqual(['ready', 'ready']);
    // Copied, not seeded: main's seed and rows are there once, and migrate ran on the copy.
    expect(await sql(one.urls.api!, 'SELECT body FROM notes ORDER BY ctid')).toBe('seeded\nfrom main');
    expect(await sql(one.urls.api!, 'SELECT what FROM runs ORDER BY ctid')).toBe('migrate\nseed\nmigrate');
    await sql(one.urls.api!, "INSERT INTO notes VALUES ('only in one')");
    expect(await sql(two.urls.api!, 'SELECT body FROM notes ORDER BY ctid')).toBe('seeded\nfrom main');
    expect(await sql(main.urls.api!, 'SELECT body FROM notes ORDER BY ctid')).toBe('seeded\nfrom main');
    await ask(one.urls.api!, '/redis?cmd=SET k one');
    expect(await ask(two.urls.api!, '/redis?cmd=GET k')).toBe('');
  }, 400_000);
});
