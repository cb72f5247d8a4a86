import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { call } from '../../support/api.js';
import {
  alive,
  hit,
  pidFileBuild,
  pollUntil,
  SERVER_JS,
  settled,
  waitForBuildPid,
} from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { defaultWorkDir, previewctl, ROOT, startProcess, stopProcess } from '../../support/process.js';

/*
 * `npm start` as a child process, killed mid-deploy (SIGKILL: no cleanup at all) and started again on the
 * same data dir: every environment must come back to a true state within a minute, nothing orphaned left.
 */

let dataDir: string;
let gitRoot: string;
beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'preview-restart-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
});
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(defaultWorkDir(dataDir), { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});

const start = () => startProcess(dataDir, { PREVIEW_GIT_ROOT: gitRoot });

describe('killing the local server mid-deploy', () => {
  test('the next start resumes the deploy, restarts ready apps and kills what the crash orphaned', async () => {
    const steadySha = makeRepo(gitRoot, 'acme/steady', {
      'preview.yaml':
        'apps:\n  web:\n    port: 3000\n    command: node server.js steady\n    health: /healthz\n',
      'server.js': SERVER_JS,
      VERSION: 'steady',
    });
    const crashSha = makeRepo(gitRoot, 'acme/crash', {
      'preview.yaml':
        'apps:\n  web:\n    port: 3000\n    command: node server.js crash\n' +
        `    build: ${pidFileBuild('build.pid', 2_000)}\n`,
      'server.js': SERVER_JS,
      VERSION: 'crash',
    });

    let server = await start();
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const auth = { authorization: `Bearer ${creds.apiKey}` };
    for (const repo of ['acme/steady', 'acme/crash'])
      expect((await previewctl(dataDir, 'apps', 'create', '--org', creds.orgId, '--repo', repo)).code).toBe(
        0,
      );
    const deploy = (repo: string, sha: string) =>
      call(server, 'POST', '/v1/preview/environments', {
        body: { repoFullName: repo, prNumber: 1, headSha: sha, headRef: 'f' },
        headers: auth,
      });
    const steadyPath = '/v1/preview/environments/acme/steady/1';
    const crashPath = '/v1/preview/environments/acme/crash/1';

    // One environment ready, one mid-build, then the server dies without any cleanup.
    expect((await deploy('acme/steady', steadySha)).status).toBe(202);
    const steady = await pollUntil(server, creds, steadyPath, settled);
    expect(steady.status).toBe('ready');
    const steadyPid = (await hit(steady.urls.web!)).pid as number;
    expect((await deploy('acme/crash', crashSha)).status).toBe(202);
    await pollUntil(server, creds, crashPath, (s) => s.phase === 'building-images');
    const buildPid = await waitForBuildPid(defaultWorkDir(dataDir), 'build.pid');
    const sandboxed = server.stderr().includes('isolation: bubblewrap');
    expect(await stopProcess(server.proc, 'SIGKILL')).toBeNull();
    // Without a sandbox the build is orphaned by the crash; a sandboxed build dies with the server.
    if (!sandboxed) expect(alive(buildPid)).toBe(true);
    expect(alive(steadyPid)).toBe(true);

    // Restart: within a minute both environments are in a true state again.
    const restartedAt = Date.now();
    server = await start();
    const crash = await pollUntil(server, creds, crashPath, (s) => s.status === 'ready', 60_000);
    const back = await pollUntil(
      server,
      creds,
      steadyPath,
      (s) => s.status === 'ready' && !!s.urls.web,
      60_000,
    );
    expect(Date.now() - restartedAt).toBeLessThan(60_000);
    expect(crash.lastDeployedSha).toBe(crashSha);
    expect((await hit(crash.urls.web!)).version).toBe('crash');
    const steadyApp = await hit(back.urls.web!);
    expect(steadyApp.version).toBe('steady');
    expect(steadyApp.pid).not.toBe(steadyPid);
    expect(back.urls.web).toBe(steady.urls.web); // it came back on its port
    // What the crash orphaned was killed, not left running beside the new processes.
    expect(alive(buildPid)).toBe(false);
    expect(alive(steadyPid)).toBe(false);

    // A graceful stop stops the apps; the next start runs them again.
    const pids = [steadyApp.pid, (await hit(crash.urls.web!)).pid] as number[];
    expect(await stopProcess(server.proc, 'SIGTERM')).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
    server = await start();
    for (const path of [steadyPath, crashPath]) {
      const s = await pollUntil(server, creds, path, (x) => x.status === 'ready' && !!x.urls.web, 60_000);
      expect(await hit(s.urls.web!)).toMatchObject({ app: expect.any(String) });
    }
    expect(await stopProcess(server.proc, 'SIGTERM')).toBe(0);
  }, 120_000);
});

describe('the default data dir, inside this project', () => {
  test('apps run as in their own clone: a CommonJS app does not inherit the project\'s "type": "module"', async () => {
    // `npm start` keeps its data in ./.preview-data, under this project's package.json ("type": "module")
    // and node_modules; an app's working copy must not resolve upwards into them.
    const insideProject = mkdtempSync(join(ROOT, '.preview-data-it-'));
    try {
      const sha = makeRepo(gitRoot, 'acme/cjs', {
        'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n',
        'server.js': SERVER_JS, // require(): CommonJS, as in a repository without a package.json
        VERSION: 'cjs',
      });
      const server = await startProcess(insideProject, { PREVIEW_GIT_ROOT: gitRoot });
      const creds = JSON.parse(readFileSync(join(insideProject, 'credentials.json'), 'utf8'));
      await previewctl(insideProject, 'apps', 'create', '--org', creds.orgId, '--repo', 'acme/cjs');
      const res = await call(server, 'POST', '/v1/preview/environments', {
        body: { repoFullName: 'acme/cjs', prNumber: 1, headSha: sha, headRef: 'f' },
        headers: { authorization: `Bearer ${creds.apiKey}` },
      });
      expect(res.status).toBe(202);
      const status = await pollUntil(server, creds, '/v1/preview/environments/acme/cjs/1', settled);
      expect(status.error).toBeUndefined();
      expect((await hit(status.urls.web!)).version).toBe('cjs');
      expect(await stopProcess(server.proc, 'SIGTERM')).toBe(0);
    } finally {
      rmSync(insideProject, { recursive: true, force: true });
      rmSync(defaultWorkDir(insideProject), { recursive: true, force: true });
    }
  }, 60_000);
});
