import { describe, expect, test } from '@jest/globals';
import { helpFor, parseCommandLine, USAGE, UsageError } from './args.js';
import { COMMANDS, type CommandSpec, GLOBAL_OPTIONS } from './command-table.js';

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
      /^unknown command frob; commands: orgs, apps, envs, secrets, tests, gate, runs, events/,
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

  test('every option of every command in the table, admin ones included, is taken for that command', () => {
    for (const command of COMMANDS) {
      const needed = requiredPositionals(command);
      for (const [name, spec] of Object.entries({ ...command.options, ...GLOBAL_OPTIONS })) {
        const expected = spec.type === 'boolean' ? true : spec.multiple ? [`v-${name}`] : `v-${name}`;
        const forms =
          spec.type === 'boolean' ? [[`--${name}`]] : [[`--${name}`, `v-${name}`], [`--${name}=v-${name}`]];
        for (const form of forms) {
          const line = [...command.name.split(' '), ...needed, ...form];
          const p = parseCommandLine(line);
          expect({
            line,
            command: p.command.name,
            value: p.values[name],
            positionals: p.positionals,
          }).toEqual({
            line,
            command: command.name,
            value: expected,
            positionals: needed,
          });
        }
      }
    }
  });

  test('an option of another command is refused, naming what this one takes', () => {
    expect(usageError(['orgs', 'create', '--file', 'x'])).toBe(
      'unknown option --file; orgs create takes --name, --json (and --org, --help)',
    );
    expect(usageError(['apps', 'list', '--name', 'x'])).toBe(
      'unknown option --name; apps list takes only --json (and --org, --help)',
    );
  });
});

/** A value for each positional `command` requires. */
function requiredPositionals(command: CommandSpec): string[] {
  return (command.positionals ?? [])
    .filter((p) => !p.endsWith('?'))
    .map((p, i) => `p${i}-${p.replace(/\W/g, '')}`);
}

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
});
