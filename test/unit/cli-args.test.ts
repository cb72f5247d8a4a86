import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { MAX_TAIL_LINES as CORE_MAX_TAIL_LINES } from '../../functions/core/environments/logs.js';
import { localCredentials } from '../../lib/local/cli/api.js';
import { COMMANDS, helpFor, parseCommandLine, USAGE, UsageError } from '../../lib/local/cli/args.js';
import {
  checkArgs,
  ENV_COLUMNS,
  environmentRows,
  MAX_TAIL_LINES,
  secretItems,
} from '../../lib/local/cli/commands.js';
import { table } from '../../lib/local/cli/format.js';
import { main } from '../../lib/local/cli/main.js';

const usageError = (args: string[]) => {
  try {
    parseCommandLine(args);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error(`parsed: ${args.join(' ')}`);
};

describe('parseCommandLine', () => {
  test('options (`--x v`, `--x=v`, flags, repeated), positionals and the global ones', () => {
    const p = parseCommandLine([
      'runs',
      'start',
      'T1',
      '--var',
      'A=1',
      '--var=B=2',
      '--wait',
      '--org',
      'o1',
      '--json',
    ]);
    expect(p.command.name).toBe('runs start');
    expect(p.positionals).toEqual(['T1']);
    expect(p.values).toMatchObject({ var: ['A=1', 'B=2'], wait: true });
    expect(p).toMatchObject({ json: true, org: 'o1' });
    // --org before the command is the global option, not the command.
    expect(parseCommandLine(['--org', 'o2', 'envs', 'list']).command.name).toBe('envs list');
  });

  test('an unknown option says what the command takes, and the nearest name', () => {
    expect(usageError(['envs', 'list', '--prr', '3'])).toBe(
      'unknown option --prr; envs list takes --repo, --status, --json (and --org, --help)',
    );
    expect(usageError(['envs', 'deploy', '--repo', 'a/b', '--pr', '7', '--shaa', 'x'])).toMatch(
      /^unknown option --shaa \(did you mean --sha\?\); envs deploy takes --repo, --pr, --sha, --branch, --wait, --timeout, --json/,
    );
    expect(usageError(['envs', 'list', '-x'])).toMatch(/^unknown option -x; envs list takes/);
  });

  test('an unknown command lists the commands there are', () => {
    expect(usageError(['envs', 'dploy'])).toBe(
      'unknown command envs dploy (did you mean deploy?); envs commands: list, status, deploy, redeploy, restart, rebuild, delete, open, logs, wait',
    );
    expect(usageError(['frob'])).toMatch(
      /^unknown command frob; commands: orgs, apps, envs, secrets, tests, runs, events/,
    );
    expect(usageError(['secrets'])).toBe('secrets needs a command: list, set, unset');
    expect(usageError([])).toMatch(/^a command is needed/);
  });

  test('values, flags and positionals are checked', () => {
    expect(usageError(['envs', 'status', '--repo'])).toBe('--repo needs a value');
    expect(usageError(['envs', 'status', '--repo', '--pr', '1'])).toBe('--repo needs a value');
    expect(usageError(['envs', 'deploy', '--wait=yes'])).toBe('--wait takes no value');
    expect(usageError(['envs', 'status', '--pr', '1', '--pr', '2'])).toBe('--pr is given twice');
    expect(usageError(['envs', 'restart', '--repo', 'a/b'])).toMatch(/^envs restart needs APP/);
    expect(usageError(['envs', 'list', 'extra'])).toBe('envs list takes no arguments, got extra');
    expect(usageError(['secrets', 'unset', 'web', 'K', 'L'])).toBe('secrets unset takes APP KEY, got also L');
    // One or more KEY=VALUE: any number is accepted by the parser.
    expect(parseCommandLine(['secrets', 'set', 'web', 'A=1', 'B=2', 'C=3']).positionals).toHaveLength(4);
  });
});

describe('checkArgs: what needs no server', () => {
  const check = (args: string[]) => () => checkArgs(parseCommandLine(args));
  const env = ['--repo', 'acme/web', '--pr', '7'];
  test('the environment, app, tail, source, status and timeout', () => {
    expect(check(['envs', 'logs', 'web', ...env, '--tail', '5', '--source', 'build'])).not.toThrow();
    expect(check(['envs', 'logs', 'web', ...env, '--tail', '0'])).toThrow(
      `--tail must be a whole number of lines from 1 to ${MAX_TAIL_LINES}`,
    );
    expect(check(['envs', 'logs', 'web', ...env, '--source', 'pod'])).toThrow(
      '--source must be app or build',
    );
    expect(check(['envs', 'logs', ...env])).toThrow('envs logs needs APP');
    expect(check(['envs', 'restart', 'Web!', ...env])).toThrow('Web! is not an app name');
    expect(check(['envs', 'status', '--repo', 'acme/web'])).toThrow('envs status needs --pr N');
    expect(check(['envs', 'status', '--repo', 'nope', '--pr', '1'])).toThrow('--repo must be owner/repo');
    expect(check(['envs', 'list', '--status', 'done'])).toThrow(/^--status must be one of pending, building/);
    expect(check(['runs', 'list', '--status', 'ready'])).toThrow(/^--status must be one of pending, running/);
    expect(check(['runs', 'wait', 'r1', '--timeout', '-1'])).toThrow('--timeout must be a number of seconds');
    expect(check(['runs', 'report'])).toThrow('runs report needs RUN');
    expect(MAX_TAIL_LINES).toBe(CORE_MAX_TAIL_LINES);
  });
});

describe('help', () => {
  test('--help, -h and help: every command; a command’s: its own lines', () => {
    expect(helpFor(['--help'])).toBe(USAGE);
    expect(helpFor(['help'])).toBe(USAGE);
    expect(helpFor(['envs', 'list'])).toBeUndefined();
    for (const c of COMMANDS) expect(USAGE).toContain(`  ${c.name}`);
    expect(helpFor(['envs', 'deploy', '-h'])).toMatch(
      /^usage: previewctl envs deploy --repo owner\/repo --pr N \[--sha SHA\]/,
    );
    expect(helpFor(['help', 'secrets', 'set'])).not.toContain('envs list');
    expect(helpFor(['help', 'nope'])).toBe(USAGE);
  });

  test('main prints help on stdout (exit 0) and usage errors as JSON with --json (exit 2)', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const admin = async () => {
      throw new Error('no admin command here');
    };
    const io = { admin, out: (t: string) => out.push(t), err: (t: string) => err.push(t), env: {} };
    expect(await main(['--help'], io)).toBe(0);
    expect(out.join('')).toBe(`${USAGE}\n`);
    out.length = 0;
    expect(await main(['envs', 'list', '--prr', '--json'], io)).toBe(2);
    expect(JSON.parse(out.join(''))).toEqual({
      error: 'unknown option --prr; envs list takes --repo, --status, --json (and --org, --help)',
    });
    expect(await main(['envs', 'list', '--prr'], io)).toBe(2);
    expect(err.join('')).toMatch(/^previewctl: unknown option --prr/);
  });
});

describe('envs list', () => {
  const envs = [0, 10, 20, 7, 8, 9].map((pr) => ({
    repoFullName: pr === 8 ? 'acme/api' : 'acme/web',
    prNumber: pr,
    status: pr === 9 ? 'failed' : 'ready',
    urls: (pr === 9 ? {} : { web: `http://127.0.0.1:4${pr}00` }) as Record<string, string>,
    error: pr === 9 ? 'app web: build failed (exit code 1)' : undefined,
    updatedAt: '2030-01-02T03:04:05.678Z',
    lastDeployedSha: 'abcdef0123456789abcdef',
  }));

  test('by repository, then PR number as a number; filters by repository and status', () => {
    const prs = (rows: { repoFullName: string; prNumber: number }[]) =>
      rows.map((e) => `${e.repoFullName}#${e.prNumber}`);
    expect(prs(environmentRows(envs, {}))).toEqual([
      'acme/api#8',
      'acme/web#0',
      'acme/web#7',
      'acme/web#9',
      'acme/web#10',
      'acme/web#20',
    ]);
    expect(prs(environmentRows(envs, { repo: 'ACME/web', status: 'ready' }))).toEqual([
      'acme/web#0',
      'acme/web#7',
      'acme/web#10',
      'acme/web#20',
    ]);
  });

  test('a table: aligned columns, numbers to the right, the cause of a failure, short commits', () => {
    const text = table(environmentRows(envs, { repo: 'acme/web' }).slice(0, 3), ENV_COLUMNS, 'none');
    expect(text.split('\n')).toEqual([
      'REPOSITORY  PR  STATUS  PHASE  COMMIT        UPDATED              APPS / ERROR',
      'acme/web     0  ready   -      abcdef012345  2030-01-02 03:04:05  web http://127.0.0.1:4000',
      'acme/web     7  ready   -      abcdef012345  2030-01-02 03:04:05  web http://127.0.0.1:4700',
      'acme/web     9  failed  -      abcdef012345  2030-01-02 03:04:05  app web: build failed (exit code 1)',
    ]);
    expect(table([], ENV_COLUMNS, 'no environments')).toBe('no environments');
  });
});

describe('secrets set', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-args-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const items = (args: string[]) => secretItems(parseCommandLine(['secrets', 'set', ...args]));

  test('KEY=VALUE arguments (a value may hold =)', () => {
    expect(items(['web', 'A=1', 'B=x=y', 'C='])).toEqual([
      { key: 'A', value: '1' },
      { key: 'B', value: 'x=y' },
      { key: 'C', value: '' },
    ]);
  });

  test('an env file: comments, blanks, export and quotes', () => {
    const file = join(dir, '.env');
    writeFileSync(file, '# app secrets\n\nexport API_TOKEN="s3 cr3t"\nDB_URL=postgres://x/y?a=b\nQ=\'q\'\n');
    expect(items(['web', '--from-env-file', file])).toEqual([
      { key: 'API_TOKEN', value: 's3 cr3t' },
      { key: 'DB_URL', value: 'postgres://x/y?a=b' },
      { key: 'Q', value: 'q' },
    ]);
  });

  test('mistakes are usage errors that never quote a value', () => {
    const file = join(dir, 'bad.env');
    writeFileSync(file, 'GOOD=1\nhunter2\n');
    expect(() => items(['web', '--from-env-file', file])).toThrow(`${file}:2: not a KEY=VALUE line`);
    expect(() => items(['web', 'hunter2'])).toThrow('argument 2 of secrets set is not KEY=VALUE');
    expect(() => items(['web', 'hunter2'])).not.toThrow(/hunter2/);
    expect(() => items(['web'])).toThrow('secrets set needs KEY=VALUE… or --from-env-file FILE');
    expect(() => items(['web', 'A=1', '--from-env-file', file])).toThrow(/not both/);
  });
});

describe('local credentials', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-creds-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the only organization by default; --org picks one of several; an unknown one is named', () => {
    writeFileSync(join(dir, 'credentials.json'), JSON.stringify({ orgId: 'o1', apiKey: 'k1' }));
    expect(localCredentials(dir, undefined)).toEqual({ orgId: 'o1', apiKey: 'k1' });
    const orgs = join(dir, 'orgs');
    mkdirSync(orgs);
    writeFileSync(join(orgs, 'o2.json'), JSON.stringify({ orgId: 'o2', apiKey: 'k2' }));
    expect(() => localCredentials(dir, undefined)).toThrow(
      `${dir} holds 2 organizations (o1, o2): pass --org ORG or set PREVIEW_ORG`,
    );
    expect(localCredentials(dir, 'o2').apiKey).toBe('k2');
    expect(() => localCredentials(dir, 'o3')).toThrow(`organization o3 not found in ${dir} (known: o1, o2)`);
  });
});

describe('the bundle bin/previewctl.mjs runs', () => {
  test('is built from any directory, its sources named from the root (so it is found fresh next time)', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'cli-cwd-'));
    try {
      const root = new URL('../..', import.meta.url).pathname;
      const run = () =>
        spawnSync(process.execPath, [join(root, 'bin/previewctl.mjs'), '--help'], { cwd, encoding: 'utf8' });
      // A source newer than the bundle: the shim rebuilds it.
      const source = join(root, 'lib/local/cli/format.ts');
      utimesSync(source, new Date(), new Date());
      expect(run().stdout).toBe(`${USAGE}\n`);
      const inputs = JSON.parse(readFileSync(join(root, 'dist/previewctl.inputs.json'), 'utf8')) as string[];
      expect(inputs).toContain('lib/local/cli/main.ts');
      for (const input of inputs) expect(input).toMatch(/^lib\/local\/cli\/[a-z-]+\.ts$/);
      const built = statSync(join(root, 'dist/previewctl.mjs')).mtimeMs;
      expect(built).toBeGreaterThanOrEqual(statSync(source).mtimeMs);
      // Fresh now: the next call leaves it as it is.
      expect(run().status).toBe(0);
      expect(statSync(join(root, 'dist/previewctl.mjs')).mtimeMs).toBe(built);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
