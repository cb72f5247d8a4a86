import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { BUILD_JS, SERVER_JS } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { previewctl, previewctlRaw, startProcess, stopProcess } from '../../support/process.js';

/*
 * The day-two commands through previewctl alone: deploy, secrets, restart, rebuild,
 * logs, open, tests, runs and their reports, redeploy, delete — against a running `npm start`, with no
 * --org (the data dir's only organization) and no HTTP call of the test's own but to the apps.
 */

let dataDir: string;
let gitRoot: string;
let server: Awaited<ReturnType<typeof startProcess>>;
const secret = 'tok-9f2c71d0';

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'preview-day-two-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-day-two-git-'));
  makeRepo(gitRoot, 'acme/web', {
    'preview.yaml':
      'apps:\n  web:\n    port: 3000\n    build: node build.js web && echo built web\n    command: node server.js web\n' +
      '    health: /healthz\n    env: { SHOW: "API_TOKEN,DB_URL" }\n',
    'server.js': SERVER_JS,
    'build.js': BUILD_JS,
    VERSION: 'v1',
  });
  server = await startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });
}, 60_000);
afterAll(async () => {
  await stopProcess(server.proc, 'SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

/** `previewctl ARGS` as a person runs it (no --json), on the data dir; `ctlWith` with other variables. */
const ctlWith = (env: Record<string, string>, ...args: string[]) => previewctlRaw(dataDir, env, ...args);
const ctl = (...args: string[]) => ctlWith({ PREVIEW_DATA_DIR: dataDir }, ...args);

const web = async (url: string) =>
  (await fetch(url)).json() as Promise<{
    env: Record<string, string | null>;
    stamp: string;
    version: string;
  }>;
const env7 = ['--repo', 'acme/web', '--pr', '7'];

describe('previewctl on day two', () => {
  test('deploy, list (numbers sorted as numbers), secrets, restart, rebuild, logs, open', async () => {
    expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/web')).code).toBe(0);

    // The head of the repository's branch by default; --wait follows it to ready.
    const deployed = await ctl('envs', 'deploy', ...env7, '--wait');
    expect(deployed.code).toBe(0);
    expect(deployed.stderr).toMatch(/^deploying acme\/web#7 at [0-9a-f]{12} \(main\)\n/);
    expect(deployed.stderr.trim().split('\n').at(-1)).toMatch(/^acme\/web#7: ready \(\d+ s\)$/);
    expect(deployed.stdout).toMatch(/^status: ready$/m);
    for (const pr of ['10', '8']) {
      expect((await ctl('envs', 'deploy', '--repo', 'acme/web', '--pr', pr)).code).toBe(0);
      expect((await ctl('envs', 'wait', '--repo', 'acme/web', '--pr', pr)).code).toBe(0);
    }
    const list = await ctl('envs', 'list');
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^REPOSITORY\s+PR\s+STATUS\s+PHASE\s+COMMIT\s+UPDATED\s+APPS \/ ERROR$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'acme/web 7 ready',
      'acme/web 8 ready',
      'acme/web 10 ready',
    ]);
    expect((await ctl('envs', 'list', '--status', 'failed')).stdout).toBe('no environments\n');

    const open = await ctl('envs', 'open', ...env7);
    expect(open.stdout).toMatch(/^web {2}http:\/\/127\.0\.0\.1:\d+\n$/);
    const url = open.stdout.trim().split(/\s+/)[1]!;
    const before = await web(url);
    expect(before.env.API_TOKEN).toBeNull();

    // Secrets: KEY=VALUE and an env file; listed by key and length, never by value.
    const set = await ctl('secrets', 'set', 'web', `API_TOKEN=${secret}`);
    expect(set.code).toBe(0);
    expect(set.stdout).toContain('saved API_TOKEN for web');
    const envFile = join(dataDir, 'web.env');
    writeFileSync(envFile, '# more\nexport DB_URL="postgres://db/web"\nEXTRA=1\n');
    expect((await ctl('secrets', 'set', 'web', '--from-env-file', envFile, '--repo', 'acme/web')).code).toBe(
      0,
    );
    const secrets = await ctl('secrets', 'list', 'web');
    expect(
      secrets.stdout
        .trim()
        .split('\n')
        .map((l) => l.split(/\s+/).slice(0, 2).join(' ')),
    ).toEqual(['KEY LENGTH', `API_TOKEN ${secret.length}`, 'DB_URL 17', 'EXTRA 1']);
    expect((await ctl('secrets', 'unset', 'web', 'EXTRA')).stdout).toBe('deleted EXTRA of web\n');
    expect(
      (await previewctl(dataDir, 'secrets', 'list', 'web')).out.keys.map((k: { key: string }) => k.key),
    ).toEqual(['API_TOKEN', 'DB_URL']);

    // Restart: the same build (stamp), the secrets now in its environment, the same URL.
    const restarted = await ctl('envs', 'restart', 'web', ...env7, '--wait');
    expect(restarted.code).toBe(0);
    const after = await web(url);
    expect(after.env).toEqual({ API_TOKEN: secret, DB_URL: 'postgres://db/web' });
    expect(after.stamp).toBe(before.stamp);

    // Rebuild: a new build of the app at the environment's head.
    expect((await ctl('envs', 'rebuild', 'web', ...env7, '--wait')).code).toBe(0);
    const rebuilt = await web((await previewctl(dataDir, 'envs', 'open', ...env7)).out.urls.web);
    expect(rebuilt.stamp).not.toBe(before.stamp);

    const buildLog = await ctl('envs', 'logs', 'web', ...env7, '--source', 'build');
    expect(buildLog.code).toBe(0);
    // The build log keeps history: the first build, then the rebuild, each under its marker.
    expect(buildLog.stdout).toMatch(/^(--- \S+ build [0-9a-f]{12} .*---\nbuilt web\n){2}$/);
    const appLog = await ctl('envs', 'logs', ...env7, '--app', 'web', '--tail', '50');
    expect(appLog.code).toBe(0);
    expect(appLog.stdout).not.toContain(secret);

    // A new commit on the branch: deploy again takes its head.
    const sha2 = commitFiles(gitRoot, 'acme/web', { VERSION: 'v2' });
    expect((await ctl('envs', 'deploy', ...env7, '--wait')).code).toBe(0);
    const status = await previewctl(dataDir, 'envs', 'status', ...env7);
    expect(status.out.lastDeployedSha).toBe(sha2);
    expect((await web(status.out.urls.web)).version).toBe('v2');
  }, 240_000);

  test('tests list and import, runs start --wait, a fresh report link, redeploy and delete', async () => {
    const apps = await previewctl(dataDir, 'apps', 'list');
    const appId = apps.out.applications[0].applicationId;
    writeFileSync(
      join(dataDir, 'tests.json'),
      JSON.stringify([
        {
          name: 'home page answers',
          folder: { id: 'smoke', name: 'Smoke' },
          application_version: { name: 'web', path: '/' },
          steps: [{ interaction: 'navigate', instruction: 'Open the home page', url: '/' }],
        },
      ]),
    );
    const imported = await previewctl(dataDir, 'tests', 'import', '--app', appId, 'tests.json');
    expect(imported.code).toBe(0);
    const testId = imported.out.tests[0].id;
    const tests = await ctl('tests', 'list');
    expect(tests.stdout).toMatch(new RegExp(`^${testId}\\s+home page answers\\s+Smoke\\s+${appId}\\s`, 'm'));
    expect((await previewctl(dataDir, 'tests', 'list', '--folder', 'smoke')).out.tests).toHaveLength(1);
    expect((await previewctl(dataDir, 'tests', 'list', '--folder', 'other')).out.tests).toEqual([]);

    const envId = (await previewctl(dataDir, 'envs', 'status', ...env7)).out.environmentId;
    const run = await ctl('runs', 'start', testId, '--env', envId, '--wait', '--timeout', '120');
    expect(run.stderr).toMatch(/^run (\w+) started; report: http:\/\/127\.0\.0\.1:\d+\/report\/\1\?expires=/);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^status: passed$/m);
    const runId = /^run (\w+)/.exec(run.stderr)![1]!;

    const report = await ctl('runs', 'report', runId);
    expect(report.code).toBe(0);
    const link = report.stdout.trim();
    expect(link).toMatch(new RegExp(`^${server.url}/report/${runId}\\?expires=\\d+&sig=`));
    const page = await fetch(link);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('home page answers');
    const listed = await previewctl(dataDir, 'runs', 'list', '--status', 'passed');
    expect(listed.out.runs).toEqual([
      expect.objectContaining({ id: runId, report_url: expect.stringContaining(`/report/${runId}?`) }),
    ]);

    expect((await ctl('envs', 'redeploy', ...env7, '--wait')).code).toBe(0);
    const deleted = await ctl('envs', 'delete', ...env7);
    expect(deleted).toMatchObject({ code: 0, stdout: 'tearing down acme/web#7\n' });
    // The teardown runs after the answer (202): `envs wait` until its workflow is done.
    await ctl('envs', 'wait', ...env7, '--timeout', '60');
    expect((await previewctl(dataDir, 'envs', 'status', ...env7)).out.status).toBe('torn_down');
    const refused = await ctl('envs', 'restart', 'web', ...env7);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^previewctl: .*torn down/);
  }, 240_000);

  test('mistakes: what exists is said, exit 2; an API refusal exits 1 with its error', async () => {
    const typo = await ctl('envs', 'list', '--prr', '3');
    expect(typo).toMatchObject({
      code: 2,
      stderr:
        'previewctl: unknown option --prr; envs list takes --repo, --status, --json (and --org, --help)\n',
    });
    expect((await ctl('envs', 'deploy', '--repo', 'acme/web', '--pr', 'seven')).stderr).toBe(
      'previewctl: --pr must be a whole number (0: the main branch)\n',
    );
    expect(await previewctl(dataDir, 'envs', 'status', '--repo', 'acme/web', '--pr', '99')).toEqual({
      code: 1,
      out: { error: 'environment not found' },
    });
    expect((await previewctl(dataDir, 'envs', 'list', '--org', 'nope')).code).toBe(2);
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    expect((await previewctl(dataDir, 'envs', 'list', '--org', creds.orgId)).code).toBe(0);
  }, 60_000);

  test('PREVIEW_API_URL: the same commands against an API named by URL, with credentials from the environment', async () => {
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const remote = {
      PREVIEW_DATA_DIR: join(dataDir, 'not-here'),
      PREVIEW_API_URL: `${server.url}/`,
      PREVIEW_API_KEY: creds.apiKey,
      PREVIEW_CLIENT_ID: creds.clientId,
      PREVIEW_CLIENT_SECRET: creds.clientSecret,
    };
    const list = await ctlWith(remote, 'envs', 'list', '--json');
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).environments.map((e: { prNumber: number }) => e.prNumber)).toEqual([
      7, 8, 10,
    ]);
    expect((await ctlWith(remote, 'runs', 'list')).stdout).toMatch(/^ID\s+TEST\s+STATUS/);
    // No git here: the commit and branch are the caller's to say.
    expect((await ctlWith(remote, 'envs', 'deploy', '--repo', 'acme/web', '--pr', '7')).stderr).toBe(
      'previewctl: envs deploy through PREVIEW_API_URL needs --sha SHA and --branch BRANCH\n',
    );
    const wrongKey = await ctlWith({ ...remote, PREVIEW_API_KEY: 'pvk_x_y' }, 'envs', 'list');
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/^previewctl: /);
    const noKey = await ctlWith({ ...remote, PREVIEW_API_KEY: '' }, 'envs', 'list');
    expect(noKey).toMatchObject({ code: 2, stderr: 'previewctl: no API key: set PREVIEW_API_KEY\n' });
  }, 60_000);
});
