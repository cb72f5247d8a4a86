import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { call } from '../../support/api.js';
import { hit, pollUntil, SERVER_JS, type Status, settled } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';
import { previewctlRaw } from '../../support/process.js';

/*
 * A failed environment keeps nothing running: every app it started is stopped, and its
 * status says which and why (`stoppedApps`). Real HTTP to the local server, apps run by the local runtime.
 */

const h = localServerForFile();

type FailedStatus = Status & { stoppedApps?: Record<string, string> };

const deploy = (repo: string, sha: string) => requestDeploy(h, repo, 1, sha);

/** The port the app's latest process was started on, from the start header of its log. */
function startedPort(repo: string, app: string): number {
  const log = readFileSync(
    join(h.dataDir, 'runtime', h.org.orgId, ...repo.split('/'), '1', 'logs', `${app}.log`),
    'utf8',
  );
  const ports = [...log.matchAll(/ start \S+ on port (\d+) ---/g)].map((m) => Number(m[1]));
  expect(ports.length).toBeGreaterThan(0);
  return ports.at(-1)!;
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('a failed environment keeps nothing running', () => {
  test('api crashes at start: web, which had started, is stopped; the status says which and why', async () => {
    const repo = 'acme/crashy';
    const sha = makeRepo(h.gitRoot, repo, {
      'preview.yaml':
        'apps:\n' +
        '  web:\n    port: 3000\n    command: node server.js web\n' +
        '  api:\n    port: 4000\n' +
        '    command: node crash.js\n',
      'server.js': SERVER_JS,
      // Its first start crashes once web has had time to listen, as an app missing a module does; later
      // ones serve.
      'crash.js':
        "const fs = require('node:fs');\n" +
        "if (fs.existsSync('.crashed')) require('./server.js');\n" +
        "else setTimeout(() => { fs.writeFileSync('.crashed', ''); console.error('Error: Cannot find module ./db'); process.exit(1); }, 300);\n",
      VERSION: 'v1',
    });
    const path = await deploy(repo, sha);
    const failed = (await pollUntil(
      h,
      h.org,
      path,
      (s: FailedStatus) => s.stoppedApps !== undefined,
    )) as FailedStatus;
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/app api exited \(exit code 1\) before it was ready/);
    expect(failed.urls).toEqual({});
    expect(failed.stoppedApps).toEqual({
      api: 'exited (exit code 1): Error: Cannot find module ./db',
      web: 'stopped: the environment failed',
    });
    // web had been started on its port; nothing answers there any more.
    expect(await listening(startedPort(repo, 'web'))).toBe(false);

    // previewctl prints them: one line per app under `stopped apps:`, and their names first in the list row.
    const remote = {
      PREVIEW_DATA_DIR: join(h.dataDir, 'not-here'),
      PREVIEW_API_URL: h.url,
      PREVIEW_API_KEY: h.org.apiKey,
    };
    const status = await previewctlRaw(h.dataDir, remote, 'envs', 'status', '--repo', repo, '--pr', '1');
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(
      '\nstopped apps:\n  api  exited (exit code 1): Error: Cannot find module ./db\n' +
        '  web  stopped: the environment failed\n',
    );
    const list = await previewctlRaw(h.dataDir, remote, 'envs', 'list', '--repo', repo);
    expect(list.stdout.trim().split('\n')[1]).toMatch(
      /^acme\/crashy\s+1\s+failed\s.*\[stopped: api, web\] Error: Cannot find module \.\/db \(app api exited/,
    );

    // A restart of one app starts the apps the failure stopped too: the environment is whole again.
    const restart = await call(h, 'PATCH', `${path}/apps/web`, {
      body: { mode: 'restart' },
      headers: h.auth,
    });
    expect(restart.status).toBe(202);
    const back = (await pollUntil(h, h.org, path, settled)) as FailedStatus;
    expect(back.status).toBe('ready');
    expect(back.stoppedApps).toBeUndefined();
    expect(Object.keys(back.urls).sort()).toEqual(['api', 'web']);
    expect(await hit(back.urls.api!)).toMatchObject({ version: 'v1' });
  }, 60_000);

  test('a newer deploy that fails to build stops the apps the previous one left running', async () => {
    const repo = 'acme/steady';
    const yaml = (build: string) =>
      `apps:\n  web:\n    port: 3000\n    build: ${build}\n    command: node server.js web\n    health: /healthz\n`;
    const sha = makeRepo(h.gitRoot, repo, {
      'preview.yaml': yaml('node -e 0'),
      'server.js': SERVER_JS,
      VERSION: 'v1',
    });
    const path = await deploy(repo, sha);
    const ready = await pollUntil(h, h.org, path, settled);
    expect(ready.status).toBe('ready');
    expect(await hit(ready.urls.web!)).toMatchObject({ app: 'web', version: 'v1' });

    const broken = commitFiles(h.gitRoot, repo, {
      'preview.yaml': yaml('node -e "process.exit(2)"'),
      VERSION: 'v2',
    });
    await deploy(repo, broken);
    const failed = (await pollUntil(
      h,
      h.org,
      path,
      (s: FailedStatus) => s.status === 'failed' && s.stoppedApps !== undefined,
    )) as FailedStatus;
    expect(failed.error).toMatch(/app web: build .* failed \(exit code 2\)/);
    expect(failed.urls).toEqual({});
    expect(failed.stoppedApps).toEqual({ web: 'stopped: the environment failed' });
    expect(await hit(ready.urls.web!)).toBeUndefined();

    // A redeploy that succeeds brings it back, and the status forgets what was stopped.
    const fixed = commitFiles(h.gitRoot, repo, { 'preview.yaml': yaml('node -e 0'), VERSION: 'v3' });
    await deploy(repo, fixed);
    const back = (await pollUntil(h, h.org, path, (s) => s.status === 'ready')) as FailedStatus;
    expect(back.stoppedApps).toBeUndefined();
    expect(await hit(back.urls.web!)).toMatchObject({ app: 'web', version: 'v3' });
  }, 60_000);
});
