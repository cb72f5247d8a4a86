import { type ChildProcess, spawn } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { lines, type MarkedBlock, markedBlocks } from '../support/markdown.js';
import { freePort, ROOT } from '../support/process.js';

/*
 * A newcomer with a fresh clone, as the README tells it: `git clone` of this repository's HEAD into a
 * temporary directory, `npm ci` there (offline from the npm cache), the README's start command, then every
 * shell block the README marks with `<!-- newcomer-test: NAME -->`, as written, in order, in one bash
 * session (the README's "second terminal"), then the marked blocks of the docs it leads to (DOCS: the
 * signed webhook delivery, the CLI's day two, through previewctl alone), and assertions on what they
 * print. Editing a marked block changes what runs here; a new marked block runs too.
 *
 * It tests what is committed (HEAD). NEWCOMER_REPO=<path of a git repository> clones that one instead;
 * NEWCOMER_NPM_CI=1 runs `npm ci` in the clone instead of taking this checkout's install (see below).
 */

const SOURCE = process.env.NEWCOMER_REPO ?? ROOT;
const SECRET_VALUES = ['s3cr3t', 'postgres://db.example/web', 'day-two-token', 'misspelt-4d2c'];
/** The docs whose marked blocks run after the README's, in this order. */
const DOCS = ['docs/reference/webhooks-and-events.md', 'docs/cli.md'];

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
  test('git clone, then the install npm ci makes', async () => {
    const cloned = await run('git', ['clone', '--quiet', SOURCE, clone], { cwd: work, timeoutMs: 120_000 });
    expect(cloned).toMatchObject({ code: 0 });
    readme = readFileSync(join(clone, 'README.md'), 'utf8');
    // The README's first lines are the two commands: install and start, install and test.
    expect(firstLine(readme)).toBe('npm ci && npm start');
    // `npm ci` of the clone installs what the lockfile says. CI has just made that very install in its own
    // fresh clone (.ci/run: `npm ci && npm test`), so, when the lockfiles are the same, the clone takes
    // it (a symlink, as the team's worktrees do) and runs the one lifecycle script npm ci would run
    // (`prepare`, the CLI's bundle): a second `npm ci --prefer-offline` took 303 s on a loaded
    // 2-core machine. NEWCOMER_NPM_CI=1 (or a lockfile that differs) runs the real `npm ci`.
    const sameLock =
      existsSync(join(ROOT, 'node_modules')) &&
      readFileSync(join(ROOT, 'package-lock.json'), 'utf8') ===
        readFileSync(join(clone, 'package-lock.json'), 'utf8');
    const install =
      process.env.NEWCOMER_NPM_CI === '1' || !sameLock
        ? { how: 'npm ci --prefer-offline', cmd: ['ci', '--prefer-offline', '--no-audit', '--no-fund'] }
        : { how: 'node_modules linked, npm run prepare', cmd: ['run', 'prepare'] };
    if (install.cmd[0] === 'run') {
      symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'), 'dir');
      // .gitignore's `node_modules/` matches a directory, not a link: the clone's own exclude file says it.
      appendFileSync(join(clone, '.git', 'info', 'exclude'), '/node_modules\n');
    }
    const ci = await run('npm', install.cmd, { cwd: clone, timeoutMs: 420_000 });
    if (ci.code !== 0) throw new Error(`${install.how} failed (exit ${ci.code}):\n${ci.output}`);
    expect(existsSync(join(clone, 'dist', 'previewctl.mjs'))).toBe(true);
    console.log(`newcomer: ${install.how} took ${(ci.ms / 1000).toFixed(1)} s`);
  }, 480_000);

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

  let blocks: (MarkedBlock & { file: string })[] = [];
  const outputs = new Map<string, string>();
  let runId = '';

  test("the walk-through's blocks, as written, in one shell", async () => {
    if (!server || server.exitCode !== null)
      throw new Error('npm start is not running: a previous step failed');
    blocks = [
      ...markedBlocks(readme).map((b) => ({ ...b, file: 'README.md' })),
      ...DOCS.flatMap((file) =>
        markedBlocks(readFileSync(join(clone, file), 'utf8')).map((b) => ({ ...b, file })),
      ),
    ];
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
      'cli',
      'webhook',
      'day-two',
    ])
      expect(names).toContain(step);
    expect(new Set(names).size).toBe(names.length); // outputs are told apart by name
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
      timeoutMs: 1_140_000,
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
        `block "${current}" (${failed?.file} line ${failed?.line}) failed, exit ${result.code}:\n` +
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
    runId = /"run_id":"([^"]+)"/.exec(out('runs'))?.[1] ?? '';
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
    // What the walk-through wrote went to its temporary directory: the checkout has nothing new
    // (.preview-data and node_modules are ignored).
    const status = await run('git', ['status', '--porcelain'], { cwd: clone, timeoutMs: 30_000 });
    expect(status).toMatchObject({ code: 0, output: '' });
  }, 1_200_000);

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

  test('the signed webhook delivery of the docs, with node, git and curl only', () => {
    const webhook = blocks.find((b) => b.name === 'webhook')!;
    expect(webhook.code).not.toMatch(/\b(uuidgen|openssl|jq)\b|localhost:3000|127\.0\.0\.1:3000/);
    expect(outputs.get('webhook')).toMatch(/^\{"accepted":true,"deliveryId":"[0-9a-f-]{36}","events":1\}$/m);
  });

  test('day two through previewctl alone: deploy, secrets, restart, rebuild, logs, redeploy, tests, runs', () => {
    const dayTwo = blocks.find((b) => b.name === 'day-two')!;
    // previewctl alone: no HTTP call of the reader's own.
    expect(dayTwo.code).not.toMatch(/\b(curl|wget|fetch)\b/);
    for (const command of [
      'envs deploy',
      'envs list',
      'envs open',
      'envs logs',
      'envs restart',
      'envs rebuild',
      'envs redeploy',
      'envs delete',
      'secrets set',
      'secrets list',
      'secrets unset',
      'tests list',
      'tests import',
      'runs start',
      'runs report',
    ])
      expect(dayTwo.code).toMatch(new RegExp(`previewctl ${command}\\b`));
    const out = outputs.get('day-two') ?? '';
    // Deployed at the head of the repository's branch, listed, its URL opened.
    expect(out).toMatch(/^deploying acme\/web#7 at [0-9a-f]{12} \(main\)$/m);
    expect(out).toMatch(/^acme\/web#7: ready \(\d+ s\)$/m);
    expect(out).toMatch(/^acme\/web +7 +ready\b/m);
    expect(out).toMatch(/^web +http:\/\/127\.0\.0\.1:\d+$/m);
    // Secrets: saved, a misspelt app warned about (naming the declared app), unset, listed by key.
    expect(out).toContain('saved API_TOKEN, FEATURE for web');
    expect(out).toContain('warning: no environment of acme/web declares an app "wbe" (they declare web)');
    expect(out).toContain('deleted API_TOKEN of wbe');
    expect(out).toMatch(/^API_TOKEN +13 /m);
    expect(out).toMatch(/^DATABASE_URL +\d+ /m);
    expect(out).not.toMatch(/^FEATURE /m);
    // The restarted app's output, the rebuild's build log.
    expect(out).toMatch(/^web listening on \d+$/m);
    // A test imported and listed, its run passing, a fresh report link.
    expect(out).toContain('day two: still greets');
    expect(out).toMatch(/^run \S+: passed \(\d+ s\)$/m);
    expect(out).toMatch(/^status: passed$/m);
    expect(out).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/report/\\S+$`, 'm'));
    expect(out).toContain('tearing down acme/web#7');
  });
});
