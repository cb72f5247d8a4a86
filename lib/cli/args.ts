/*
 * previewctl's commands, their options and help, and the parser of a command line. Nothing here loads
 * more than this file: `previewctl --help` and a usage error answer without the service's code.
 */

/** A mistake in how the CLI was called: exit code 2, the message on stderr. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export interface CommandSpec {
  /** `noun verb`. */
  name: string;
  /** What follows the name in the help (its positionals and options). */
  synopsis: string;
  /** The help's description, one or more lines. */
  help: string;
  /** Its options besides the global ones: `name` takes a value, `name!` is a flag. */
  options: string[];
  /** Its positionals: `NAME` required, `NAME?` optional, `NAME...` one or more. */
  positionals?: string[];
  /**
   * `api`: through the service's HTTP API (the running local server, or the API PREVIEW_API_URL names);
   * `admin`: acts on the tables (organizations, applications, tests import) or the event bus itself.
   */
  via: 'api' | 'admin';
}

const env = '--repo owner/repo --pr N';

export const COMMANDS: CommandSpec[] = [
  {
    name: 'orgs create',
    synopsis: '--name NAME',
    help: 'create an organization → orgId, apiKey, clientId, clientSecret (shown once; locally also kept in\n<data dir>/orgs/ORG.json so previewctl can act for it)',
    options: ['name'],
    via: 'admin',
  },
  {
    name: 'apps list',
    synopsis: '',
    help: "the organization's applications (id, repository, settings)",
    options: [],
    via: 'api',
  },
  {
    name: 'apps create',
    synopsis: '[--repo owner/repo] [--name NAME] [--disabled] [--no-installation]',
    help: 'create an application; without --repo it is unlinked → applicationId',
    options: ['repo', 'name', 'disabled!', 'no-installation!'],
    via: 'admin',
  },
  {
    name: 'apps update',
    synopsis:
      '--app ID [--ttl-hours N] [--deploy-drafts | --no-deploy-drafts] [--factory-app APP --factory-path /PATH]\n' +
      '    [--allowed-origins ORIGINS] [--access protected|public] [--sleep-after-minutes N]\n' +
      '    [--skip-label L] [--require-label L] [--paths GLOB,…] [--skip-authors A,…]',
    help:
      "change an application's settings: hours without a deploy before a PR preview is torn down (default\n" +
      '72, 0 = never), whether draft pull requests deploy, the Environment Factory of scenario runs\n' +
      "(preview.yaml `factory` wins when both are set), the origins a test run's browser may load besides\n" +
      'the preview\'s own app URLs ("https://login.example.com,https://cdn.example.com"; replaces the list,\n' +
      '"" empties it), who may open its previews (protected: only through the signed link of `envs open`;\n' +
      'default protected in AWS, public locally), idle minutes before a PR preview sleeps (default 30,\n' +
      '0 = never, decimals allowed; main-branch previews never sleep), which pull requests get a preview: a label that opts out (default\n' +
      'no-preview, "" for none), a label that must be present, path globs a pull request must touch\n' +
      '("web/**,shared/**"), authors skipped ("dependabot[bot]"); lists replace the old one, "" empties it',
    options: [
      'app',
      'ttl-hours',
      'deploy-drafts!',
      'no-deploy-drafts!',
      'factory-app',
      'factory-path',
      'allowed-origins',
      'access',
      'sleep-after-minutes',
      'skip-label',
      'require-label',
      'paths',
      'skip-authors',
    ],
    via: 'admin',
  },
  {
    name: 'apps rotate-access-key',
    synopsis: '--app ID',
    help: "replace the application's access key: every link and cookie into its protected previews stops working",
    options: ['app'],
    via: 'admin',
  },
  {
    name: 'apps rotate-factory-secret',
    synopsis: '--app ID',
    help: "replace the application's factory signing secret (apps get the new one on their next deploy)",
    options: ['app'],
    via: 'admin',
  },
  {
    name: 'envs list',
    synopsis: '[--repo owner/repo] [--status STATUS]',
    help: "the organization's environments, by repository and PR number",
    options: ['repo', 'status'],
    via: 'api',
  },
  {
    name: 'envs status',
    synopsis: env,
    help: "one environment's status: commit, apps and URLs, the failure's cause",
    options: ['repo', 'pr'],
    via: 'api',
  },
  {
    name: 'envs deploy',
    synopsis: `${env} [--sha SHA] [--branch BRANCH] [--wait] [--timeout SECONDS]`,
    help:
      "deploy the PR (or redeploy it at a new head). Locally the branch defaults to the repository's\n" +
      'checked-out one and the commit to its head; through PREVIEW_API_URL --sha and --branch are\n' +
      'required. --wait: until ready (exit 0) or failed (exit 1)',
    options: ['repo', 'pr', 'sha', 'branch', 'wait!', 'timeout'],
    via: 'api',
  },
  {
    name: 'envs redeploy',
    synopsis: `${env} [--wait] [--timeout SECONDS]`,
    help: "run the whole pipeline again at the environment's current head",
    options: ['repo', 'pr', 'wait!', 'timeout'],
    via: 'api',
  },
  {
    name: 'envs restart',
    synopsis: `APP ${env} [--wait] [--timeout SECONDS]`,
    help: 'start one app again from its build (after a secret changed); its siblings are untouched',
    options: ['repo', 'pr', 'wait!', 'timeout'],
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'envs rebuild',
    synopsis: `APP ${env} [--wait] [--timeout SECONDS]`,
    help: "build one app again at the environment's head and redeploy only it",
    options: ['repo', 'pr', 'wait!', 'timeout'],
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'envs delete',
    synopsis: env,
    help: 'tear the environment down: its apps stop, their working copies are removed',
    options: ['repo', 'pr'],
    via: 'api',
  },
  {
    name: 'envs open',
    synopsis: env,
    help:
      "print the environment's app URLs, one per line (`app URL`); for a protected preview each app's\n" +
      'signed link, which lets a browser in for 7 days',
    options: ['repo', 'pr'],
    via: 'api',
  },
  {
    name: 'envs logs',
    synopsis: `APP ${env} [--tail N] [--source app|build]`,
    help:
      "the end of an app's output (default) or of its latest build's, secret values masked (docs/logs.md);\n" +
      'APP may also be given as --app APP',
    options: ['repo', 'pr', 'app', 'tail', 'source'],
    positionals: ['APP?'],
    via: 'api',
  },
  {
    name: 'envs wait',
    synopsis: `${env} [--timeout SECONDS]`,
    help: 'poll until ready (exit 0) or failed (exit 1), a progress line on stderr per change (default 600 s)',
    options: ['repo', 'pr', 'timeout'],
    via: 'api',
  },
  {
    name: 'secrets list',
    synopsis: 'APP [--repo owner/repo | --application ID]',
    help:
      "an app's secret keys with their lengths (values never come back). The application: --application,\n" +
      "else the one linked to --repo, else the organization's only one",
    options: ['repo', 'application'],
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'secrets set',
    synopsis: 'APP KEY=VALUE... | APP --from-env-file FILE [--repo owner/repo | --application ID]',
    help:
      "add or replace keys of an app's secret bundle (others are kept); a FILE of KEY=VALUE lines (# comments,\n" +
      'blank lines and `export ` are skipped). Running apps get them when they restart (envs restart)',
    options: ['repo', 'application', 'from-env-file'],
    positionals: ['APP', 'KEY=VALUE...?'],
    via: 'api',
  },
  {
    name: 'secrets unset',
    synopsis: 'APP KEY [--repo owner/repo | --application ID]',
    help: "remove one key of an app's secret bundle",
    options: ['repo', 'application'],
    positionals: ['APP', 'KEY'],
    via: 'api',
  },
  {
    name: 'tests list',
    synopsis: '[--folder ID]',
    help: "the organization's tests (GET /test)",
    options: ['folder'],
    via: 'api',
  },
  {
    name: 'tests import',
    synopsis: '[--app ID] FILE',
    help:
      "import a JSON array of tests → their ids; --app sets every test's application (the one whose\n" +
      'environments its runs target), whatever application_id the file gives',
    options: ['app'],
    positionals: ['FILE'],
    via: 'admin',
  },
  {
    name: 'runs start',
    synopsis: 'TEST [--env ENVIRONMENT_ID] [--var NAME=VALUE]... [--wait] [--timeout SECONDS]',
    help:
      'start a run of a test → its id and report link; --env: the environment to run against (else the\n' +
      "test's application's), --var overrides a variable; --wait: until passed (exit 0) or failed (exit 1)",
    options: ['env', 'var*', 'wait!', 'timeout'],
    positionals: ['TEST'],
    via: 'api',
  },
  {
    name: 'runs list',
    synopsis: '[--test ID] [--status pending|running|passed|failed] [--limit N]',
    help: "the organization's test runs, newest first (default 20, at most 100)",
    options: ['test', 'status', 'limit'],
    via: 'api',
  },
  {
    name: 'runs get',
    synopsis: 'RUN',
    help: 'one run with its steps (RUN may also be given as --run RUN)',
    options: ['run'],
    positionals: ['RUN?'],
    via: 'api',
  },
  {
    name: 'runs report',
    synopsis: 'RUN',
    help: "a fresh link to the run's report (opens without credentials for 7 days)",
    options: ['run'],
    positionals: ['RUN?'],
    via: 'api',
  },
  {
    name: 'runs wait',
    synopsis: 'RUN [--timeout SECONDS]',
    help: 'poll until the run has passed (exit 0) or failed (exit 1), a progress line on stderr per change',
    options: ['run', 'timeout'],
    positionals: ['RUN?'],
    via: 'api',
  },
  {
    name: 'events put',
    synopsis: '--file EVENT.json',
    help:
      "put events on the service's event bus (locally: the running server's, through its inbox; with\n" +
      'PREVIEW_MODE=aws: EventBridge, EVENT_BUS_NAME). EVENT.json: an EventBridge event, a PutEvents\n' +
      'entry, a list of them, or {"Entries":[...]}',
    options: ['file'],
    via: 'admin',
  },
];

/** Options every command takes. */
const GLOBAL = ['org', 'json!', 'help!'];

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

/** The first two words of `args` that are neither options nor `--org`'s value. */
function commandWords(args: string[]): string[] {
  const words: string[] = [];
  for (let i = 0; i < args.length && words.length < 2; i++) {
    const a = args[i]!;
    if (a === '--org') i++;
    else if (!a.startsWith('-')) words.push(a);
  }
  return words;
}

/** Parse `args` (after `previewctl`): the command, its options and positionals, or a UsageError. */
export function parseCommandLine(args: string[]): Parsed {
  const command = findCommand(args);
  const specs = new Map<string, 'value' | 'flag' | 'list'>();
  for (const o of [...command.options, ...GLOBAL]) {
    const name = o.replace(/[!*]$/, '');
    specs.set(name, o.endsWith('!') ? 'flag' : o.endsWith('*') ? 'list' : 'value');
  }
  const values: Parsed['values'] = {};
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      words.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-h') continue;
    if (!arg.startsWith('--')) {
      if (arg.startsWith('-') && arg.length > 1) throw unknownOption(arg, command, specs);
      words.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const kind = specs.get(name);
    if (!kind) throw unknownOption(`--${name}`, command, specs);
    if (kind === 'flag') {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      values[name] = true;
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      value = args[i + 1];
      if (value === undefined || (value.startsWith('--') && value.length > 2))
        throw new UsageError(`--${name} needs a value`);
      i++;
    }
    if (kind === 'list') values[name] = [...((values[name] as string[] | undefined) ?? []), value];
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

function unknownOption(given: string, command: CommandSpec, specs: Map<string, string>): UsageError {
  const own = command.options.map((o) => `--${o.replace(/[!*]$/, '')}`);
  const all = [...specs.keys()].map((k) => `--${k}`);
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
