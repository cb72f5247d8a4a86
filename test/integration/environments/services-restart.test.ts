// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${services.<name>.url}` syntax, not JS templates
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { call } from '../../support/api.js';
import { pollUntil, settled } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { defaultWorkDir, previewctl, startProcess, stopProcess } from '../../support/process.js';

/*
 * A preview's services across a restart of `npm start` (a child process on one data dir): killed without
 * any cleanup (SIGKILL), the next start brings the environment back with its Postgres and Redis on the
 * data they held, the same rows and keys, and stops them with a graceful stop.
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
  } catch (err) { res.writeHead(500); return res.end(String(err.stderr || err.message)); }
  res.writeHead(404); res.end();
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
const YAML = `services:
  db:
    kind: postgres
    version: "15"
  cache:
    kind: redis
    version: "7"
apps:
  api:
    port: 3000
    command: node app.js
    health: /healthz
    env:
      DATABASE_URL: \${services.db.url}
      REDIS_URL: \${services.cache.url}
`;

/** Long names, as GitHub allows them (an owner of up to 39 characters, a repository of up to 100). */
const REPO = `acme-${'o'.repeat(34)}/${'r'.repeat(100)}`;

let dataDir: string;
let gitRoot: string;
/** The server this test started last: killed in afterAll when an expectation failed before it stopped. */
let running: { proc: ChildProcess } | undefined;
beforeAll(() => {
  // A long data dir (and long owner and repository names below): a Unix socket's path has at most 107
  // bytes, so the services' sockets must not live under it.
  dataDir = mkdtempSync(join(tmpdir(), `preview-services-restart-${'d'.repeat(60)}-`));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
});
afterAll(async () => {
  if (running && running.proc.exitCode === null && running.proc.signalCode === null)
    await stopProcess(running.proc, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(defaultWorkDir(dataDir), { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

async function ask(url: string, path: string): Promise<string> {
  const res = await fetch(new URL(path, url), { signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${res.status}: ${text}`);
  return text;
}
const sql = (url: string, q: string) => ask(url, `/pg?sql=${encodeURIComponent(q)}`);

describe('services across a restart of the server', () => {
  test('killed and started again, the preview comes back with the rows and keys its services held', async () => {
    const sha = makeRepo(gitRoot, REPO, { 'preview.yaml': YAML, 'app.js': APP_JS });
    const start = async () => {
      const started = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
      running = started;
      return started;
    };
    let server = await start();
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const auth = { authorization: `Bearer ${creds.apiKey}` };
    expect((await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', REPO)).code).toBe(0);
    const path = `/v1/preview/environments/${REPO}/1`;
    const res = await call(server, 'POST', '/v1/preview/environments', {
      body: { repoFullName: REPO, prNumber: 1, headSha: sha, headRef: 'f' },
      headers: auth,
    });
    expect(res.status).toBe(202);
    const first = await pollUntil(server, creds, path, settled, 90_000);
    expect(first.error).toBeUndefined();
    const url = first.urls.api!;
    await sql(url, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('before the crash')");
    expect(await ask(url, '/redis?cmd=SET k kept')).toBe('OK');

    expect(await stopProcess(server.proc, 'SIGKILL')).toBeNull();
    server = await start();
    const back = await pollUntil(server, creds, path, (s) => s.status === 'ready' && !!s.urls.api, 90_000);
    expect(back as unknown).toMatchObject({
      services: { db: { kind: 'postgres', status: 'ready' }, cache: { kind: 'redis', status: 'ready' } },
    });
    expect(await sql(back.urls.api!, 'SELECT body FROM notes')).toBe('before the crash');
    expect(await ask(back.urls.api!, '/redis?cmd=GET k')).toBe('kept');
    expect(await stopProcess(server.proc, 'SIGTERM')).toBe(0);
  }, 180_000);
});
