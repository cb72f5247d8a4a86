import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { bearer, call, client } from '../../support/api.js';
import { SERVER_JS } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import {
  previewctl,
  previewctlRaw,
  ROOT,
  startProcess,
  startToExit,
  stopProcess,
} from '../../support/process.js';

/* What a newcomer runs into first: `npm start` on a busy port, answers in a shell, the CLI. */

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'preview-newcomer-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('npm start on a busy port', () => {
  test('one clear line, no stack trace, exit 1; the data dir is left alone', async () => {
    const holder: Server = createServer();
    await new Promise<void>((ok) => holder.listen(0, '127.0.0.1', () => ok()));
    const port = (holder.address() as { port: number }).port;
    const dataDir = join(tempDir(), 'data');
    try {
      const { code, stderr } = await startToExit({ PORT: String(port), PREVIEW_DATA_DIR: dataDir });
      expect(code).toBe(1);
      expect(stderr.trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^port ${port} is in use; set PORT=`)),
      ]);
      expect(stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise((ok) => holder.close(ok));
    }
  }, 60_000);
});

describe('answers end with a newline', () => {
  test('JSON bodies of the local server (its own and the routes’) end with \\n', async () => {
    const dataDir = tempDir();
    const server = await startProcess(dataDir);
    try {
      for (const path of ['/healthz', '/no/such/route', '/v1/preview/environments/acme/web/1']) {
        const res = await fetch(`${server.url}${path}`);
        const text = await res.text();
        expect(res.headers.get('content-type')).toMatch(/application\/json/);
        expect(text.endsWith('}\n')).toBe(true);
      }
    } finally {
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 90_000);
});

describe('one application per repository in an organization', () => {
  test('a second `apps create` for the repository exits non-zero with the existing id', async () => {
    const dataDir = tempDir();
    const org = await previewctl(dataDir, 'orgs', 'create', '--name', 'acme');
    const first = await previewctl(dataDir, 'apps', 'create', '--org', org.out.orgId, '--repo', 'acme/web');
    expect(first.code).toBe(0);
    const second = await previewctl(dataDir, 'apps', 'create', '--org', org.out.orgId, '--repo', 'Acme/Web');
    expect(second.code).toBe(1);
    expect(second.out).toEqual({
      error: `Acme/Web already has an application in this organization: ${first.out.applicationId}`,
      applicationId: first.out.applicationId,
    });
    const human = await previewctlRaw(
      dataDir,
      { PREVIEW_DATA_DIR: dataDir },
      'apps',
      'create',
      '--org',
      org.out.orgId,
      '--repo',
      'acme/web',
    );
    expect(human.code).toBe(1);
    expect(human.stderr).toContain(first.out.applicationId);
    // Another organization may link the same repository.
    const other = await previewctl(dataDir, 'orgs', 'create', '--name', 'other');
    expect(
      (await previewctl(dataDir, 'apps', 'create', '--org', other.out.orgId, '--repo', 'acme/web')).code,
    ).toBe(0);
  }, 90_000);
});

describe('tests import', () => {
  test('takes an absolute path, and a navigate step without an element', async () => {
    const dataDir = tempDir();
    const elsewhere = tempDir();
    const org = await previewctl(dataDir, 'orgs', 'create', '--name', 'acme');
    const file = join(elsewhere, 'tests.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          name: 'home page',
          folder: { id: 'f1', name: 'Smoke' },
          application_version: { name: 'v1', path: '/app' },
          steps: [{ instruction: 'Open the home page', interaction: 'navigate', url: '/' }],
        },
      ]),
    );
    const imported = await previewctl(dataDir, 'tests', 'import', '--org', org.out.orgId, file);
    expect(imported).toEqual({ code: 0, out: { tests: [{ id: expect.any(String), name: 'home page' }] } });
  }, 60_000);
});

describe('previewctl help, usage errors, and where it looks', () => {
  test('--help, <command> --help and help print to stdout and exit 0; usage errors exit 2', async () => {
    const dataDir = tempDir();
    const env = { PREVIEW_DATA_DIR: dataDir };
    const all = await previewctlRaw(dataDir, env, '--help');
    expect(all).toMatchObject({ code: 0, stderr: '' });
    expect(all.stdout).toMatch(/^usage: previewctl <command>/);
    expect(all.stdout).toContain('envs wait --repo owner/repo --pr N');
    const one = await previewctlRaw(dataDir, env, 'apps', 'create', '--help');
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^usage: previewctl apps create \[--repo owner\/repo\]/);
    expect(one.stdout).not.toContain('tests import');
    const help = await previewctlRaw(dataDir, env, 'help', 'envs', 'wait');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: previewctl envs wait/);
    expect((await previewctlRaw(dataDir, env, 'help')).stdout).toBe(all.stdout);
    expect((await previewctlRaw(dataDir, env, 'frobnicate')).code).toBe(2);
    expect((await previewctlRaw(dataDir, env, 'orgs', 'create', '--bogus')).code).toBe(2);
    expect((await previewctlRaw(dataDir, env, 'envs', 'status', '--org', 'x', '--repo', 'a/b')).code).toBe(2);
  }, 60_000);

  test('run from another directory it says where it looked and creates nothing there', async () => {
    const elsewhere = tempDir();
    const { PREVIEW_DATA_DIR: _, ...env } = process.env;
    const res = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        'node',
        [join(ROOT, 'bin/previewctl.mjs'), 'orgs', 'create', '--name', 'x'],
        { cwd: elsewhere, env },
        (err, _out, stderr) => resolve({ code: (err as { code?: number } | null)?.code ?? 0, stderr }),
      );
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`no data dir at ${join(elsewhere, '.preview-data')}`);
    expect(res.stderr).toContain('PREVIEW_DATA_DIR');
    expect(existsSync(join(elsewhere, '.preview-data'))).toBe(false);
  }, 60_000);
});

describe('previewctl lists, status and waits', () => {
  test('apps list, envs list/status/wait (ready → 0, failed → 1), runs list/get', async () => {
    const dataDir = tempDir();
    const gitRoot = tempDir();
    const good = makeRepo(gitRoot, 'acme/good', {
      'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n',
      'server.js': SERVER_JS,
      VERSION: 'v1',
    });
    const bad = makeRepo(gitRoot, 'acme/bad', {
      'preview.yaml': `apps:\n  web:\n    port: 3000\n    build: node -e "process.exit(3)"\n    command: node server.js\n`,
      'server.js': SERVER_JS,
      VERSION: 'v1',
    });
    const server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
    try {
      const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
      const org = ['--org', creds.orgId];
      const app = await previewctl(dataDir, 'apps', 'create', ...org, '--repo', 'acme/good');
      await previewctl(dataDir, 'apps', 'create', ...org, '--repo', 'acme/bad');
      const apps = await previewctl(dataDir, 'apps', 'list', ...org);
      expect(apps.code).toBe(0);
      expect(apps.out.applications.map((a: { repoFullName: string }) => a.repoFullName).sort()).toEqual([
        'acme/bad',
        'acme/good',
      ]);
      expect(apps.out.applications).toContainEqual(
        expect.objectContaining({ applicationId: app.out.applicationId, ttlHours: 72 }),
      );
      for (const [repo, sha] of [
        ['acme/good', good],
        ['acme/bad', bad],
      ] as const) {
        const res = await call({ url: server.url }, 'POST', '/v1/preview/environments', {
          body: { repoFullName: repo, prNumber: 1, headSha: sha, headRef: 'f' },
          headers: bearer(creds),
        });
        expect(res.status).toBe(202);
      }
      const waitGood = await previewctlRaw(
        dataDir,
        { PREVIEW_DATA_DIR: dataDir },
        'envs',
        'wait',
        ...org,
        '--repo',
        'acme/good',
        '--pr',
        '1',
        '--json',
      );
      expect(waitGood.code).toBe(0);
      expect(JSON.parse(waitGood.stdout)).toMatchObject({
        status: 'ready',
        urls: { web: expect.any(String) },
      });
      expect(waitGood.stderr).toMatch(/^acme\/good#1: \w+/);
      expect(waitGood.stderr.trim().split('\n').at(-1)).toMatch(/^acme\/good#1: ready \(\d+ s\)$/);

      const waitBad = await previewctl(dataDir, 'envs', 'wait', ...org, '--repo', 'acme/bad', '--pr', '1');
      expect(waitBad.code).toBe(1);
      expect(waitBad.out).toMatchObject({
        status: 'failed',
        error: expect.stringContaining('app web: build'),
      });

      const status = await previewctl(dataDir, 'envs', 'status', ...org, '--repo', 'acme/good', '--pr', '1');
      expect(status).toMatchObject({
        code: 0,
        out: { repoFullName: 'acme/good', prNumber: 1, status: 'ready' },
      });
      const missing = await previewctl(dataDir, 'envs', 'status', ...org, '--repo', 'acme/good', '--pr', '9');
      expect(missing).toEqual({ code: 1, out: { error: 'environment not found' } });
      const list = await previewctl(dataDir, 'envs', 'list', ...org);
      expect(list.code).toBe(0);
      expect(
        list.out.environments.map(
          (e: { repoFullName: string; status: string }) => `${e.repoFullName} ${e.status}`,
        ),
      ).toEqual(['acme/bad failed', 'acme/good ready']);

      expect(await previewctl(dataDir, 'runs', 'list', ...org)).toEqual({ code: 0, out: { runs: [] } });
      expect(await previewctl(dataDir, 'runs', 'get', ...org, '--run', 'nope')).toEqual({
        code: 1,
        out: { error: 'run not found' },
      });
      // A run of a test whose application has no repository: it fails at once, and `runs wait` says so.
      const unlinked = await previewctl(dataDir, 'apps', 'create', ...org);
      writeFileSync(
        join(dataDir, 'tests.json'),
        JSON.stringify([
          {
            name: 'home page',
            folder: { id: 'f1', name: 'Smoke' },
            application_version: { name: 'v1', path: '/' },
            steps: [{ instruction: 'Open it', interaction: 'navigate', url: '/' }],
          },
        ]),
      );
      const imported = await previewctl(
        dataDir,
        'tests',
        'import',
        ...org,
        '--app',
        unlinked.out.applicationId,
        join(dataDir, 'tests.json'),
      );
      const started = await call({ url: server.url }, 'POST', `/test/${imported.out.tests[0].id}/run`, {
        headers: client(creds),
      });
      expect(started.status).toBe(201);
      const runId = started.body.run_id;
      const waited = await previewctl(dataDir, 'runs', 'wait', ...org, '--run', runId);
      expect(waited.code).toBe(1);
      expect(waited.out).toMatchObject({ status: 'failed', error: expect.stringContaining('not linked') });
      const runs = await previewctl(dataDir, 'runs', 'list', ...org, '--status', 'failed');
      expect(runs.out.runs.map((r: { id: string }) => r.id)).toEqual([runId]);
      expect((await previewctl(dataDir, 'runs', 'get', ...org, '--run', runId)).out.status).toBe('failed');
    } finally {
      await stopProcess(server.proc, 'SIGTERM');
    }
  }, 180_000);
});
