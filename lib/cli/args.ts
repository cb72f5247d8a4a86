import { parseArgs } from 'node:util';
import { COMMANDS, type CommandSpec, GLOBAL_OPTIONS, type OptionSpec } from './command-table.js';

/*
 * previewctl's one parser, built from the command table (command-table.ts) with node:util parseArgs, for
 * the API commands and the admin commands alike; and the help, printed from the same table. Nothing here
 * loads more than node:util and the table: `previewctl --help` and a usage error answer without the
 * service's code.
 */

/** A mistake in how the CLI was called: exit code 2, the message on stderr. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `usage: previewctl <command> [options] [--org ORG] [--json]

${COMMANDS.map((c) => `  ${c.name}${c.synopsis ? ` ${c.synopsis}` : ''}\n${indent(c.help)}`).join('\n')}
  help [COMMAND]
      this text, or a command's (as \`previewctl COMMAND --help\`)

Output: tables and lines for people; --json prints one JSON object on stdout (errors too: {"error"}).
Exit codes: 0 done, 1 failed (a wait that ended failed, too), 2 usage errors.

Where it acts: locally (default) on the server \`npm start\` runs on PREVIEW_DATA_DIR (./.preview-data),
through its API with the credentials kept there; --org (or PREVIEW_ORG) picks an organization when the
data dir holds several. With PREVIEW_API_URL (a deployed API: PREVIEW_MODE=aws) it calls that API with
PREVIEW_API_KEY (envs, secrets) and PREVIEW_CLIENT_ID / PREVIEW_CLIENT_SECRET (tests, runs); the admin
commands (orgs, apps, tests import, events put) then use the tables named by the TABLE_* variables.
More: docs/cli.md`;

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `      ${l}`)
    .join('\n');
}

/** A command line, parsed. */
export interface Parsed {
  command: CommandSpec;
  /** Option values: a string, `true` for a flag, a list for a repeatable option. */
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  json: boolean;
  org?: string;
}

/** What `--help`, `-h` or `help …` asks for: the help text, or undefined when no help is asked. */
export function helpFor(args: string[]): string | undefined {
  let words: string[];
  if (args[0] === 'help') words = args.slice(1).filter((a) => !a.startsWith('-'));
  else if (args.includes('--help') || args.includes('-h')) words = args.filter((a) => !a.startsWith('-'));
  else return undefined;
  const command = COMMANDS.find((c) => c.name === words.slice(0, 2).join(' '));
  if (!command) return USAGE;
  return `usage: previewctl ${command.name}${command.synopsis ? ` ${command.synopsis}` : ''} [--org ORG] [--json]\n${indent(command.help)}`;
}

const nouns = () => [...new Set(COMMANDS.map((c) => c.name.split(' ')[0]!))];

/** The command `args` name, or a UsageError saying which exist. */
export function findCommand(args: string[]): CommandSpec {
  const [noun, verb] = commandWords(args);
  if (!noun) throw new UsageError(`a command is needed: ${nouns().join(', ')} (previewctl --help)`);
  const ofNoun = COMMANDS.filter((c) => c.name.startsWith(`${noun} `));
  if (ofNoun.length === 0)
    throw new UsageError(
      `unknown command ${noun}${suggest(noun, nouns())}; commands: ${nouns().join(', ')} (previewctl --help)`,
    );
  const verbs = ofNoun.map((c) => c.name.split(' ')[1]!);
  const command = ofNoun.find((c) => c.name === `${noun} ${verb}`);
  if (!command)
    throw new UsageError(
      verb === undefined
        ? `${noun} needs a command: ${verbs.join(', ')}`
        : `unknown command ${noun} ${verb}${suggest(verb, verbs)}; ${noun} commands: ${verbs.join(', ')}`,
    );
  return command;
}

/**
 * The first two words of `args` that are neither options nor a global option's value (`--org ORG`): the
 * command, read before its options are known (they then shape the parse).
 */
function commandWords(args: string[]): string[] {
  const words: string[] = [];
  for (let i = 0; i < args.length && words.length < 2; i++) {
    const a = args[i]!;
    const name = a.startsWith('--') ? a.slice(2) : '';
    if (Object.hasOwn(GLOBAL_OPTIONS, name) && GLOBAL_OPTIONS[name]!.type === 'string') i++;
    else if (!a.startsWith('-')) words.push(a);
  }
  return words;
}

/**
 * Parse `args` (after `previewctl`): the command, its options and positionals, or a UsageError. parseArgs
 * reads the line with the command's options and the global ones from the table (in its lenient mode,
 * so that each mistake is told in previewctl's words, the first one on the line first): an option the
 * command does not take, a flag given a value, a value missing or given twice, too few or too many
 * positionals.
 */
export function parseCommandLine(args: string[]): Parsed {
  const command = findCommand(args);
  const options: Record<string, OptionSpec> = { ...command.options, ...GLOBAL_OPTIONS };
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const values: Parsed['values'] = {};
  const words: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'option-terminator') continue;
    if (token.kind === 'positional') {
      words.push(token.value);
      continue;
    }
    // The argument as given: a short option's group (`-abc`) is named whole, a long one without its value.
    const given = args[token.index]!;
    if (!given.startsWith('--')) {
      if (given !== '-h') throw unknownOption(given, command, options);
      values.help = true;
      continue;
    }
    const eq = given.indexOf('=');
    const name = given.slice(2, eq < 0 ? undefined : eq);
    const spec = Object.hasOwn(options, name) ? options[name] : undefined;
    if (!spec) throw unknownOption(`--${name}`, command, options);
    if (spec.type === 'boolean') {
      if (token.inlineValue) throw new UsageError(`--${name} takes no value`);
      values[name] = true;
      continue;
    }
    // parseArgs takes the next argument as the value whatever it is: one that is an option is missing one.
    const value = token.value;
    if (value === undefined || (!token.inlineValue && value.startsWith('--') && value.length > 2))
      throw new UsageError(`--${name} needs a value`);
    if (spec.multiple) values[name] = [...((values[name] as string[] | undefined) ?? []), value];
    else if (values[name] !== undefined) throw new UsageError(`--${name} is given twice`);
    else values[name] = value;
  }
  const positionals = words.slice(2);
  checkPositionals(command, positionals);
  return {
    command,
    values,
    positionals,
    json: values.json === true,
    org: values.org as string | undefined,
  };
}

function checkPositionals(command: CommandSpec, given: string[]): void {
  const wanted = command.positionals ?? [];
  const required = wanted.filter((p) => !p.endsWith('?')).map((p) => p.replace(/\.\.\.$/, ''));
  const variadic = wanted.some((p) => p.replace(/\?$/, '').endsWith('...'));
  if (given.length < required.length)
    throw new UsageError(
      `${command.name} needs ${required.slice(given.length).join(' ')} (previewctl ${command.name} ${command.synopsis})`,
    );
  if (!variadic && given.length > wanted.length)
    throw new UsageError(
      wanted.length === 0
        ? `${command.name} takes no arguments, got ${given.join(' ')}`
        : `${command.name} takes ${wanted.map((p) => p.replace(/\?$/, '')).join(' ')}, got also ${given.slice(wanted.length).join(' ')}`,
    );
}

function unknownOption(given: string, command: CommandSpec, options: Record<string, OptionSpec>): UsageError {
  const own = Object.keys(command.options).map((o) => `--${o}`);
  const all = Object.keys(options).map((k) => `--${k}`);
  const takes = own.length ? `${own.join(', ')}, --json` : 'only --json';
  return new UsageError(
    `unknown option ${given}${suggest(given, all)}; ${command.name} takes ${takes} (and --org, --help)`,
  );
}

/** ` (did you mean X?)` for the nearest of `names` within two edits (and less than half of it), else ''. */
export function suggest(given: string, names: string[]): string {
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.ceil(given.replace(/^-+/, '').length / 2));
  for (const name of names) {
    const d = distance(given, name);
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
    }
  }
  return best !== undefined && best !== given ? ` (did you mean ${best}?)` : '';
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}
