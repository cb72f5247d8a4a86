import { describe, expect, test } from '@jest/globals';
import type { Parsed } from './args.js';
import { USAGE } from './args.js';
import { COMMANDS, type CommandSpec } from './command-table.js';
import { main } from './main.js';

describe('help', () => {
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

/** A value for each positional `command` requires. */
function requiredPositionals(command: CommandSpec): string[] {
  return (command.positionals ?? [])
    .filter((p) => !p.endsWith('?'))
    .map((p, i) => `p${i}-${p.replace(/\W/g, '')}`);
}

describe('admin commands', () => {
  test('get their options from the one parser of the table: main hands each admin command its parse', async () => {
    for (const command of COMMANDS.filter((c) => c.via === 'admin')) {
      const needed = requiredPositionals(command);
      const options = Object.entries(command.options);
      const given = options.flatMap(([name, spec]) =>
        spec.type === 'boolean' ? [`--${name}`] : [`--${name}`, `v-${name}`],
      );
      const handed: Parsed[] = [];
      const admin = async (p: Parsed) => {
        handed.push(p);
        return 0;
      };
      const args = [...command.name.split(' '), ...needed, ...given, '--org', 'o1', '--json'];
      expect(await main(args, { admin, out: () => undefined, err: () => undefined, env: {} })).toBe(0);
      expect(handed).toHaveLength(1);
      expect(handed[0]).toMatchObject({
        command: { name: command.name, via: 'admin' },
        positionals: needed,
        json: true,
        org: 'o1',
        values: Object.fromEntries(
          options.map(([name, spec]) => [name, spec.type === 'boolean' ? true : `v-${name}`]),
        ),
      });
    }
  });

  test('a usage error is told before the admin half loads', async () => {
    const out: string[] = [];
    const admin = async () => {
      throw new Error('the admin half is not loaded for a usage error');
    };
    const io = { admin, out: (t: string) => out.push(t), err: () => undefined, env: {} };
    expect(await main(['apps', 'update', '--app', 'a1', '--ttl-hour', '5', '--json'], io)).toBe(2);
    expect(JSON.parse(out.join(''))).toEqual({
      error: expect.stringMatching(
        /^unknown option --ttl-hour \(did you mean --ttl-hours\?\); apps update takes --app, --ttl-hours/,
      ),
    });
  });
});
