import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { lines, type MarkedBlock, markedBlocks } from '../support/markdown.js';
import { freePort, ROOT } from '../support/process.js';

/*
 * A newcomer with a fresh clone, as the README tells it: `git clone` of this repository's HEAD into a
 * temporary directory, `npm ci` there (offline from the npm cache), the README's start command, then every
 * shell block the README marks with `<!-- newcomer-test: NAME -->`, as written, in order, in one bash
 * session (the README's "second terminal"), and assertions on what they print. Editing a marked block
 * changes what runs here; a new marked block runs too.
 *
 * It tests what is committed (HEAD). NEWCOMER_REPO=<path of a git repository> clones that one instead.
 */

const SOURCE = process.env.NEWCOMER_REPO ?? ROOT;
const SECRET_VALUES = ['s3cr3t', 'postgres://db.example/web'];

let work: string; // the temporary root: the clone, TMPDIR of everything started, the script
let clone: string;
let env: NodeJS.ProcessEnv; // what a newcomer's shell has: no test runner's npm_*, PREVIEW_*, NODE_OPTIONS
let server: ChildProcess | undefined;
let serverOutput = '';
let port = 0;
let readme = '';

/**
 * Run `cmd args` in `cwd` in its own process group (killed whole after `timeoutMs`); resolves with its exit
 * code and output (stdout and stderr interleaved).
 */
function run(
  cmd: string,
  args: string[],
  opts: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<{ code: number | null; output: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    const collect = (c: Buffer) => {
      output += c.toString();
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    const timer = setTimeout(() => {
      output += `\n[timed out after ${opts.timeoutMs / 1000} s: killed]`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, opts.timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output, ms: Date.now() - started });
    });
  });
}

/** The README's first command line (the first line of its first block), its `# comment` dropped. */
function firstLine(markdown: string): string {
  const first = lines(markdown).find((l) => l.inFence && !/^ {0,3}(`{3,}|~{3,})/.test(l.text));
  return (first?.text ?? '').replace(/\s+#.*$/, '').trim();
}

/** Stop `npm start` as a newcomer does (Ctrl-C: SIGINT to its process group), SIGKILL after 30 s. */
async function stopServer(): Promise<void> {
  const proc = server;
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((ok) => proc.once('exit', () => ok()));
  const group = (signal: NodeJS.Signals) => {
    try {
      process.kill(-proc.pid!, signal);
    } catch {
      // already gone
    }
  };
  group('SIGINT');
  const timer = setTimeout(() => group('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'preview-newcomer-'));
  clone = join(work, 'preview-control-plane');
  mkdirSync(join(work, 'tmp'));
  env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !/^(npm_|PREVIEW_|NODE_OPTIONS$|INIT_CWD$|JEST_|TABLE_|STATE_MACHINE_)/.test(k),
    ),
  );
  env.TMPDIR = join(work, 'tmp'); // the default work dir and every temp file land here, removed after
}, 30_000);

afterAll(async () => {
  await stopServer();
  if (work) rmSync(work, { recursive: true, force: true });
}, 180_000);

describe('a newcomer, from a fresh clone, following the README', () => {
  test('git clone, npm ci (offline from the cache)', async () => {
    const cloned = await run('git', ['clone', '--quiet', SOURCE, clone], { cwd: work, timeoutMs: 120_000 });
    expect(cloned).toMatchObject({ code: 0 });
    readme = readFileSync(join(clone, 'README.md'), 'utf8');
    // The README's first lines are the two commands: install and start, install and test.
    expect(firstLine(readme)).toBe('npm ci && npm start');
    const ci = await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: clone,
      timeoutMs: 300_000,
    });
    if (ci.code !== 0) throw new Error(`npm ci failed (exit ${ci.code}):\n${ci.output}`);
    console.log(`newcomer: npm ci took ${(ci.ms / 1000).toFixed(1)} s`);
  }, 360_000);

  test('npm start: listens, with credentials in .preview-data', async () => {
    if (!readme) throw new Error('no clone: the previous step failed');
    port = await freePort();
    // `npm start` as the README writes it (its first line), with PORT as its quick start shows.
    server = spawn('npm', ['start'], {
      cwd: clone,
      env: { ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, so a Ctrl-C reaches npm and the server alike
    });
    const listening = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no listening line in 90 s:\n${serverOutput}`)),
        90_000,
      );
      const onData = (c: Buffer) => {
        serverOutput += c.toString();
        if (serverOutput.includes(`listening on http://127.0.0.1:${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      };
      server!.stdout!.on('data', onData);
      server!.stderr!.on('data', onData);
      server!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`npm start exited ${code}:\n${serverOutput}`));
      });
    });
    await listening;
    expect(serverOutput).toContain('credentials:');
    const creds = JSON.parse(readFileSync(join(clone, '.preview-data/credentials.json'), 'utf8'));
    expect(Object.keys(creds).sort()).toEqual(['apiKey', 'clientId', 'clientSecret', 'orgId']);
  }, 120_000);

  let blocks: MarkedBlock[] = [];
  const outputs = new Map<string, string>();
  let runId = '';

  test("the walk-through's blocks, as written, in one shell", async () => {
    if (!server || server.exitCode !== null)
      throw new Error('npm start is not running: a previous step failed');
    blocks = markedBlocks(readme);
    const names = blocks.map((b) => b.name);
    for (const step of [
      'credentials',
      'repository',
      'deploy',
      'secrets',
      'logs',
      'recipes',
      'runs',
      'teardown',
    ])
      expect(names).toContain(step);
    // One bash session: set -e and pipefail so a failing command stops it and names its block.
    const script = [
      'set -eo pipefail',
      'exec 2>&1',
      ...blocks.flatMap((b) => [`echo '@@block ${b.name}'`, b.code]),
      "echo '@@end'",
      '',
    ].join('\n');
    const file = join(work, 'walk-through.sh');
    writeFileSync(file, script);
    const result = await run('bash', [file], {
      cwd: clone,
      env: { ...env, PORT: String(port) },
      timeoutMs: 600_000,
    });
    let current = '';
    for (const line of result.output.split('\n')) {
      const m = /^@@block (\S+)$/.exec(line);
      if (m) {
        current = m[1]!;
        outputs.set(current, '');
      } else if (line !== '@@end' && current) outputs.set(current, `${outputs.get(current)}${line}\n`);
    }
    if (result.code !== 0 || !result.output.includes('@@end')) {
      const failed = blocks.find((b) => b.name === current);
      throw new Error(
        `README block "${current}" (README.md line ${failed?.line}) failed, exit ${result.code}:\n` +
          `--- the block ---\n${failed?.code}\n--- what it printed ---\n${outputs.get(current)}\n` +
          `--- npm start's last output ---\n${serverOutput.slice(-4000)}`,
      );
    }
    const out = (name: string) => outputs.get(name) ?? '';
    // Credentials, the repository and its application.
    expect(out('credentials')).toContain('{"status":"ok"}');
    expect(out('repository')).toMatch(/^[a-z0-9]{20,32}$/m);
    // Deploy, poll, the app answers.
    expect(out('deploy')).toContain('"accepted":true');
    expect(out('deploy')).toContain('"status":"ready"');
    expect(out('deploy')).toContain('hello, token missing');
    // Secrets: stored, listed by key, and the restarted app has them.
    expect(out('secrets')).toContain('"status":"saved","count":2');
    expect(out('secrets')).toContain('"key":"API_TOKEN","maskedLength":6');
    expect(out('secrets')).toContain('hello, token set');
    // The app's log.
    expect(out('logs')).toMatch(/^web listening on \d+$/m);
    // A recipe version.
    expect(out('recipes')).toMatch(/"setupId":"shop-demo","version":1,"recipeCount":1/);
    // A test, a run that passes, its report and media answering.
    expect(out('runs')).toContain('"message":"test run created"');
    expect(out('runs')).toMatch(/^passed$/m);
    expect(out('runs')).toContain('passed: found "hello, token set" in the page');
    expect(out('runs')).toContain('report 200');
    expect(out('runs')).toContain('video 200 video/mp4');
    expect(out('runs')).toContain('screenshot 200 image/png');
    runId = JSON.parse(readFileSync(join(clone, 'run.json'), 'utf8')).run_id;
    // Teardown.
    expect(out('teardown')).toContain('"accepted":true');
    expect(out('teardown')).toMatch(/^torn_down$/m);
    // Secret values never come back, neither to the shell nor into the server's log.
    for (const value of SECRET_VALUES) {
      expect(result.output).not.toContain(value);
      expect(serverOutput).not.toContain(value);
    }
    // No request the README makes is a server error.
    expect(serverOutput).not.toMatch(/"status":5\d\d/);
  }, 660_000);

  test("the CLI commands the README shows (after the walk-through's)", () => {
    expect(blocks.map((b) => b.name)).toContain('cli');
    const cli = outputs.get('cli') ?? '';
    expect(cli).toContain('usage: previewctl <command>');
    expect(cli).toContain('acme/web');
    expect(cli).toContain('torn_down');
    expect(runId).not.toBe('');
    expect(cli).toContain(runId);
    // A command the CLI has is shown by a block this test runs: once `previewctl --help` lists
    // `envs logs`, the README must run it (the logs step is the place).
    const shown = blocks.map((b) => b.code).join('\n');
    for (const command of [
      'envs wait',
      'envs status',
      'envs list',
      'apps list',
      'runs list',
      'runs get',
      'envs logs',
    ]) {
      if (cli.includes(`  ${command} `)) expect(shown).toContain(`previewctl ${command}`);
    }
  });
});
