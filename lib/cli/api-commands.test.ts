import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { MAX_TAIL_LINES as CORE_MAX_TAIL_LINES } from '../../functions/core/environments/logs.js';
import { checkArgs, MAX_TAIL_LINES, secretItems } from './api-commands.js';
import { parseCommandLine } from './args.js';

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

  test('an env file, read by env-file.ts (its cases are in env-file.test.ts)', () => {
    const file = join(dir, '.env');
    writeFileSync(
      file,
      '# app secrets\n\nexport API_TOKEN="s3 cr3t"\nDB_URL=postgres://x/y?a=b # prod\nQ=\'q\'\n',
    );
    expect(items(['web', '--from-env-file', file])).toEqual([
      { key: 'API_TOKEN', value: 's3 cr3t' },
      { key: 'DB_URL', value: 'postgres://x/y?a=b' },
      { key: 'Q', value: 'q' },
    ]);
    expect(() => items(['web', '--from-env-file', join(dir, 'missing.env')])).toThrow(/cannot read .*ENOENT/);
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
