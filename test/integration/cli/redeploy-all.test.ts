import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { BUILD_JS, SERVER_JS } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { previewctl, previewctlRaw, startProcess, stopProcess } from '../../support/process.js';

/*
 * `previewctl envs redeploy --all` against a running `npm start`: the one command that moves every live
 * preview onto what the current version deploys (an upgrade). Two live previews and a torn-down one;
 * --dry-run lists the live ones and changes nothing; --wait redeploys each, one at a time, and says how
 * each ended.
 */

let dataDir: string;
let gitRoot: string;
let server: Awaited<ReturnType<typeof startProcess>>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'preview-redeploy-all-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-redeploy-all-git-'));
  makeRepo(gitRoot, 'acme/web', {
    'preview.yaml':
      'apps:\n  web:\n    port: 3000\n    build: node build.js web\n    command: node server.js web\n    health: /healthz\n',
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

const ctl = (...args: string[]) => previewctlRaw(dataDir, { PREVIEW_DATA_DIR: dataDir }, ...args);
/** When PR `pr`'s environment last changed (a redeploy moves it through the pipeline again). */
async function updatedOf(pr: string): Promise<string> {
  const { out } = await previewctl(dataDir, 'envs', 'status', '--repo', 'acme/web', '--pr', pr);
  return out.updatedAt as string;
}

describe('previewctl envs redeploy --all', () => {
  test('lists the live previews (--dry-run), then redeploys each and says how it ended', async () => {
    expect((await previewctl(dataDir, 'apps', 'create', '--repo', 'acme/web')).code).toBe(0);
    for (const pr of ['1', '2', '3'])
      expect((await ctl('envs', 'deploy', '--repo', 'acme/web', '--pr', pr, '--wait')).code).toBe(0);
    expect((await ctl('envs', 'delete', '--repo', 'acme/web', '--pr', '3')).code).toBe(0);
    await ctl('envs', 'wait', '--repo', 'acme/web', '--pr', '3', '--timeout', '60');
    const before = { 1: await updatedOf('1'), 2: await updatedOf('2') };

    const dry = await ctl('envs', 'redeploy', '--all', '--dry-run');
    expect([dry.code, dry.stdout]).toEqual([0, 'acme/web#1  would redeploy\nacme/web#2  would redeploy\n']);
    expect(await updatedOf('1')).toBe(before[1]);

    const moved = await ctl('envs', 'redeploy', '--all', '--wait', '--timeout', '120');
    expect(moved.stdout).toBe('acme/web#1  redeployed: ready\nacme/web#2  redeployed: ready\n');
    expect(moved.code).toBe(0);
    // Each went through the pipeline again.
    expect((await updatedOf('1')) > before[1]).toBe(true);
    expect((await updatedOf('2')) > before[2]).toBe(true);

    const json = await previewctl(dataDir, 'envs', 'redeploy', '--all', '--dry-run', '--repo', 'acme/other');
    expect(json).toEqual({ code: 0, out: { dryRun: true, environments: [] } });
    const refused = await ctl('envs', 'redeploy', '--all', '--pr', '1');
    expect([refused.code, refused.stderr]).toEqual([
      2,
      'previewctl: envs redeploy --all takes no --pr (--repo narrows it)\n',
    ]);
  }, 300_000);
});
