import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { MAX_LOG_BYTES, TRUNCATED_NOTICE } from '../../../functions/core/environments/logs.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { pollUntil, settled } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';

/*
 * GET /v1/preview/environments/{owner}/{repo}/{pr}/apps/{app}/logs over real HTTP to the local server:
 * an app's output and its build's, as text, secrets masked, capped at 1 MB; bad input and other
 * organizations answered with JSON errors. And failures whose error leads with the real cause.
 */

const h = localServerForFile({ env: { PREVIEW_READY_TIMEOUT_SECONDS: '10' } });

const ROOT = new URL('../../..', import.meta.url).pathname;

/** `previewctl ARGS` against the local server's data dir (its database): exit code, stdout, stderr. */
async function previewctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      'node',
      [join(ROOT, 'bin/previewctl.mjs'), ...args],
      {
        cwd: h.dataDir,
        env: { ...process.env, PREVIEW_DATA_DIR: h.dataDir },
        maxBuffer: 4 * 1024 * 1024,
      },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Prints its secret (as is, JSON-escaped, base64), `FILLER` lines of 1000 characters, then serves. */
const APP_JS = `
const http = require('node:http');
const token = process.env.API_TOKEN || '';
console.log('starting web');
console.log('token is ' + token);
console.log(JSON.stringify({ token }));
console.log('basic ' + Buffer.from(token).toString('base64'));
for (let i = 0; i < Number(process.env.FILLER || 0); i++) console.log('filler ' + i + ' ' + 'x'.repeat(1000));
console.log('listening now');
http.createServer((q, r) => r.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');
`;
const yaml = (filler: number, build = 'node -e "console.log(\'compiling web\')"') =>
  `apps:\n  web:\n    port: 3000\n    build: ${build}\n    command: node app.js\n    env: { FILLER: "${filler}" }\n`;
const SECRET = 'tok"en\\with-quote-and-backslash-9f3a';

const deploy = (repo: string, files: Record<string, string>): Promise<string> =>
  requestDeploy(h, repo, 1, makeRepo(h.gitRoot, repo, files));

describe('an app that prints its secret', () => {
  let path: string;
  beforeAll(async () => {
    const applicationId = await linkRepo(h.org, 'acme/logs');
    const put = await call(h, 'PUT', `/v1/preview/secrets/${applicationId}/web/API_TOKEN`, {
      body: { value: SECRET },
      headers: h.auth,
    });
    expect(put.status).toBe(200);
    path = await deploy('acme/logs', { 'preview.yaml': yaml(0), 'app.js': APP_JS });
    expect(await pollUntil(h, h.org, path, settled)).toMatchObject({ status: 'ready' });
  }, 60_000);

  test('its log is text, the secret masked in every form', async () => {
    const res = await call(h, 'GET', `${path}/apps/web/logs`, { headers: h.auth });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.text).toContain('starting web\n');
    expect(res.text).toContain('token is [secret]\n');
    expect(res.text).toContain('{"token":"[secret]"}\n');
    expect(res.text).toContain('basic [secret]\n');
    expect(res.text.endsWith('listening now\n')).toBe(true);
    for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1), Buffer.from(SECRET).toString('base64')])
      expect(res.text).not.toContain(form);
    expect(res.text).not.toContain('9f3a');
    // The latest process only: no build output, no header of the runtime's.
    expect(res.text).not.toContain('compiling web');
  });

  test('tail=N answers the last N lines', async () => {
    const res = await call(h, 'GET', `${path}/apps/web/logs?tail=2`, { headers: h.auth });
    expect(res.status).toBe(200);
    expect(res.text).toBe('basic [secret]\nlistening now\n');
  });

  test('source=build answers the latest build output', async () => {
    const res = await call(h, 'GET', `${path}/apps/web/logs?source=build`, { headers: h.auth });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/^--- \S+ build [0-9a-f]{12} \(generation 1\) ---\ncompiling web\n$/);
  });

  test('previewctl envs logs prints the same text; a missing log is exit 1 with the error on stderr', async () => {
    const env = ['--org', h.org.orgId, '--repo', 'acme/logs', '--pr', '1'];
    const app = await previewctl('envs', 'logs', ...env, '--app', 'web', '--tail', '3');
    expect(app).toEqual({
      code: 0,
      stdout: '{"token":"[secret]"}\nbasic [secret]\nlistening now\n',
      stderr: '',
    });
    const build = await previewctl('envs', 'logs', ...env, '--app', 'web', '--source', 'build');
    expect(build.code).toBe(0);
    expect(build.stdout).toMatch(/\ncompiling web\n$/);
    const unknown = await previewctl('envs', 'logs', ...env, '--app', 'api');
    expect(unknown).toEqual({
      code: 1,
      stdout: '',
      stderr: 'previewctl: app api is not an app of this environment\n',
    });
    const badTail = await previewctl('envs', 'logs', ...env, '--app', 'web', '--tail', '0');
    expect(badTail.code).toBe(2);
    expect(badTail.stderr).toContain('--tail must be a whole number of lines from 1 to 10000');
    const help = await previewctl('envs', 'logs', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(
      /^usage: previewctl envs logs APP --repo owner\/repo --pr N \[--tail N\] \[--source app\|build\]/,
    );
  }, 60_000);

  test.each([
    ['tail=-1', 'tail must be a whole number of lines from 1 to 10000'],
    ['tail=abc', 'tail must be a whole number of lines from 1 to 10000'],
    ['tail=0', 'tail must be a whole number of lines from 1 to 10000'],
    ['tail=10001', 'tail must be a whole number of lines from 1 to 10000'],
    ['tail=1.5', 'tail must be a whole number of lines from 1 to 10000'],
    ['source=pods', 'source must be app or build'],
  ])('%s is a 400 naming the field', async (q, message) => {
    const res = await call(h, 'GET', `${path}/apps/web/logs?${q}`, { headers: h.auth });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.body.error).toContain(message);
  });

  test('an unknown app, an unknown environment, another organization: 404 JSON; no key: 401', async () => {
    const unknownApp = await call(h, 'GET', `${path}/apps/api/logs`, { headers: h.auth });
    expect(unknownApp.status).toBe(404);
    expect(unknownApp.body).toEqual({ error: 'app api is not an app of this environment' });
    const badName = await call(h, 'GET', `${path}/apps/Not_An_App/logs`, { headers: h.auth });
    expect(badName.status).toBe(400);
    expect(badName.body.error).toMatch(/app/);
    const none = await call(h, 'GET', '/v1/preview/environments/acme/logs/2/apps/web/logs', {
      headers: h.auth,
    });
    expect(none.status).toBe(404);
    expect(none.body).toEqual({ error: 'environment not found' });
    const other = await h.newOrg('other');
    const foreign = await call(h, 'GET', `${path}/apps/web/logs`, { headers: bearer(other) });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'environment not found' });
    const anonymous = await call(h, 'GET', `${path}/apps/web/logs`);
    expect(anonymous.status).toBe(401);
  });
});

test('output over 1 MB is cut from the start under a notice', async () => {
  // 1500 lines of ~1 KB: about 1.5 MB.
  const path = await deploy('acme/chatty', { 'preview.yaml': yaml(1500), 'app.js': APP_JS });
  expect(await pollUntil(h, h.org, path, settled)).toMatchObject({ status: 'ready' });
  const res = await call(h, 'GET', `${path}/apps/web/logs?tail=10000`, { headers: h.auth });
  expect(res.status).toBe(200);
  const bytes = Buffer.byteLength(res.text);
  expect(bytes).toBeLessThanOrEqual(MAX_LOG_BYTES);
  expect(bytes).toBeGreaterThan(MAX_LOG_BYTES - 2_000);
  const lines = res.text.split('\n');
  expect(lines[0]).toBe(TRUNCATED_NOTICE);
  expect(lines[1]).toMatch(/^filler \d+ x{1000}$/);
  expect(res.text.endsWith(`filler 1499 ${'x'.repeat(1000)}\nlistening now\n`)).toBe(true);
  // A tail that fits is not cut.
  const small = await call(h, 'GET', `${path}/apps/web/logs?tail=5`, { headers: h.auth });
  expect(small.text.split('\n')[0]).toMatch(/^filler 1496 /);
}, 60_000);

describe('failures lead with the real cause and say where the full log is', () => {
  test('a build that requires a missing file: Cannot find module, phase building-images', async () => {
    const path = await deploy('acme/missing-config', {
      'preview.yaml': yaml(0, 'node build.js'),
      'build.js': `console.log('reading config');\nconst config = require('./missing-config.json');\nconsole.log(config);\n`,
      'app.js': APP_JS,
    });
    const status = await pollUntil(h, h.org, path, settled);
    expect(status).toMatchObject({ status: 'failed', phase: 'building-images' });
    expect(status.error).toMatch(/^Error: Cannot find module '\.\/missing-config\.json'/);
    expect(status.error).toContain('(app web: build `node build.js` failed (exit code 1))');
    expect(status.error).toMatch(
      /; full log: previewctl envs logs web --repo acme\/missing-config --pr 1 --source build$/,
    );
    // The command it names reads this route: the whole build output, the Node footer included.
    const log = await call(h, 'GET', `${path}/apps/web/logs?source=build`, { headers: h.auth });
    expect(log.status).toBe(200);
    expect(log.text).toContain("Error: Cannot find module './missing-config.json'");
    expect(log.text).toContain('reading config');
    expect(log.text).toMatch(/Node\.js v\d+/);
    // The app never started: its own log does not exist yet.
    const app = await call(h, 'GET', `${path}/apps/web/logs`, { headers: h.auth });
    expect(app.status).toBe(404);
    expect(app.body).toEqual({ error: 'app web has no output (yet): it has not been started' });
  }, 60_000);

  test('an app that crashes on start: its thrown error first, phase waiting-ready', async () => {
    const path = await deploy('acme/crash', {
      'preview.yaml': yaml(0),
      'app.js': `console.log('booting');\nthrow new TypeError('PORT is not a number: ' + process.env.NOPE);\n`,
    });
    const status = await pollUntil(h, h.org, path, settled);
    expect(status).toMatchObject({ status: 'failed', phase: 'waiting-ready' });
    expect(status.error).toMatch(
      /^TypeError: PORT is not a number: undefined \(app web exited \(exit code 1\) before it was ready\); full log: previewctl envs logs web --repo acme\/crash --pr 1$/,
    );
    const log = await call(h, 'GET', `${path}/apps/web/logs`, { headers: h.auth });
    expect(log.text).toContain('booting\n');
    expect(log.text).toContain('TypeError: PORT is not a number');
  }, 60_000);
});
