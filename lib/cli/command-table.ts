/*
 * previewctl's command table: every command, its options with their types, its positionals, its help,
 * and which half of previewctl runs it. Plain data that imports nothing: args.ts builds the one parser
 * of both halves and the help from it, and the fast path's bundle carries it without the service's code.
 * A command or an option added here is parsed, checked and shown in the help with nothing else to edit.
 */

/**
 * An option, in `node:util` `parseArgs` terms (args.ts hands these to it as they are): `string` takes a
 * value (`--x v` or `--x=v`), `boolean` is a flag; `multiple` may be given again, its values a list.
 */
export interface OptionSpec {
  type: 'string' | 'boolean';
  /** @default false: given twice is a usage error */
  multiple?: boolean;
  /** A one-letter alias (`-h`). @default - none */
  short?: string;
}

/** A value option (`--repo owner/repo`). */
const value: OptionSpec = { type: 'string' };
/** A flag (`--wait`). */
const flag: OptionSpec = { type: 'boolean' };
/** A value option that may be repeated (`--var A=1 --var B=2`). */
const list: OptionSpec = { type: 'string', multiple: true };

export interface CommandSpec {
  /** `noun verb`. */
  name: string;
  /** What follows the name in the help (its positionals and options). */
  synopsis: string;
  /** The help's description, one or more lines. */
  help: string;
  /** Its options besides the global ones (`GLOBAL_OPTIONS`), by name without the `--`, in help order. */
  options: Record<string, OptionSpec>;
  /** Its positionals: `NAME` required, `NAME?` optional, `NAME...` one or more. @default - none */
  positionals?: string[];
  /**
   * `api`: through the service's HTTP API (the running local server, or the API PREVIEW_API_URL names),
   * run by the fast path (api-commands.ts, bundled with node built-ins only);
   * `admin`: acts on the tables (organizations, applications, tests import) or the event bus itself,
   * with the service's own code, which admin-commands.ts loads with tsx.
   */
  via: 'api' | 'admin';
}

const env = '--repo owner/repo --pr N';

export const COMMANDS: CommandSpec[] = [
  {
    name: 'orgs create',
    synopsis: '--name NAME',
    help: 'create an organization → orgId, apiKey, clientId, clientSecret (shown once; locally also kept in\n<data dir>/orgs/ORG.json so previewctl can act for it)',
    options: { name: value },
    via: 'admin',
  },
  {
    name: 'apps list',
    synopsis: '',
    help: "the organization's applications (id, repository, settings)",
    options: {},
    via: 'api',
  },
  {
    name: 'apps create',
    synopsis: '[--repo owner/repo] [--name NAME] [--disabled] [--no-installation]',
    help: 'create an application; without --repo it is unlinked → applicationId',
    options: { repo: value, name: value, disabled: flag, 'no-installation': flag },
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
    options: {
      app: value,
      'ttl-hours': value,
      'deploy-drafts': flag,
      'no-deploy-drafts': flag,
      'factory-app': value,
      'factory-path': value,
      'allowed-origins': value,
      access: value,
      'sleep-after-minutes': value,
      'skip-label': value,
      'require-label': value,
      paths: value,
      'skip-authors': value,
    },
    via: 'admin',
  },
  {
    name: 'apps rotate-access-key',
    synopsis: '--app ID',
    help: "replace the application's access key: every link and cookie into its protected previews stops working",
    options: { app: value },
    via: 'admin',
  },
  {
    name: 'apps rotate-factory-secret',
    synopsis: '--app ID',
    help: "replace the application's factory signing secret (apps get the new one on their next deploy)",
    options: { app: value },
    via: 'admin',
  },
  {
    name: 'envs list',
    synopsis: '[--repo owner/repo] [--status STATUS]',
    help: "the organization's environments, by repository and PR number",
    options: { repo: value, status: value },
    via: 'api',
  },
  {
    name: 'envs status',
    synopsis: env,
    help: "one environment's status: commit, apps and URLs, the failure's cause",
    options: { repo: value, pr: value },
    via: 'api',
  },
  {
    name: 'envs deploy',
    synopsis: `${env} [--sha SHA] [--branch BRANCH] [--wait] [--timeout SECONDS]`,
    help:
      "deploy the PR (or redeploy it at a new head). Locally the branch defaults to the repository's\n" +
      'checked-out one and the commit to its head; through PREVIEW_API_URL --sha and --branch are\n' +
      'required. --wait: until ready (exit 0) or failed (exit 1)',
    options: { repo: value, pr: value, sha: value, branch: value, wait: flag, timeout: value },
    via: 'api',
  },
  {
    name: 'envs redeploy',
    synopsis: `${env} [--wait] [--timeout SECONDS] | --all [--repo owner/repo] [--dry-run] [--wait]`,
    help:
      "run the whole pipeline again at the environment's current head. --all: every live (ready)\n" +
      "preview of the organization (or of --repo), a line each saying what happened (an upgrade's move\n" +
      'onto the new objects); --dry-run lists them; --wait redeploys one at a time, each until it settles',
    options: { repo: value, pr: value, wait: flag, timeout: value, all: flag, 'dry-run': flag },
    via: 'api',
  },
  {
    name: 'envs restart',
    synopsis: `APP ${env} [--wait] [--timeout SECONDS]`,
    help: 'start one app again from its build (after a secret changed); its siblings are untouched',
    options: { repo: value, pr: value, wait: flag, timeout: value },
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'envs rebuild',
    synopsis: `APP ${env} [--wait] [--timeout SECONDS]`,
    help: "build one app again at the environment's head and redeploy only it",
    options: { repo: value, pr: value, wait: flag, timeout: value },
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'envs delete',
    synopsis: env,
    help: 'tear the environment down: its apps stop, their working copies are removed',
    options: { repo: value, pr: value },
    via: 'api',
  },
  {
    name: 'envs open',
    synopsis: env,
    help:
      "print the environment's app URLs, one per line (`app URL`); for a protected preview each app's\n" +
      'signed link, which lets a browser in for 7 days',
    options: { repo: value, pr: value },
    via: 'api',
  },
  {
    name: 'envs logs',
    synopsis: `APP ${env} [--tail N] [--source app|build]`,
    help:
      "the end of an app's output (default) or of its latest build's, secret values masked (docs/logs.md);\n" +
      'APP may also be given as --app APP',
    options: { repo: value, pr: value, app: value, tail: value, source: value },
    positionals: ['APP?'],
    via: 'api',
  },
  {
    name: 'envs wait',
    synopsis: `${env} [--timeout SECONDS]`,
    help: 'poll until ready (exit 0) or failed (exit 1), a progress line on stderr per change (default 600 s)',
    options: { repo: value, pr: value, timeout: value },
    via: 'api',
  },
  {
    name: 'secrets list',
    synopsis: 'APP [--repo owner/repo | --application ID]',
    help:
      "an app's secret keys with their lengths (values never come back). The application: --application,\n" +
      "else the one linked to --repo, else the organization's only one",
    options: { repo: value, application: value },
    positionals: ['APP'],
    via: 'api',
  },
  {
    name: 'secrets set',
    synopsis: 'APP KEY=VALUE... | APP --from-env-file FILE [--repo owner/repo | --application ID]',
    help:
      "add or replace keys of an app's secret bundle (others are kept); a FILE of KEY=VALUE lines (# comments,\n" +
      'blank lines and `export ` are skipped). Running apps get them when they restart (envs restart)',
    options: { repo: value, application: value, 'from-env-file': value },
    positionals: ['APP', 'KEY=VALUE...?'],
    via: 'api',
  },
  {
    name: 'secrets unset',
    synopsis: 'APP KEY [--repo owner/repo | --application ID]',
    help: "remove one key of an app's secret bundle",
    options: { repo: value, application: value },
    positionals: ['APP', 'KEY'],
    via: 'api',
  },
  {
    name: 'tests list',
    synopsis: '[--folder ID]',
    help: "the organization's tests (GET /test)",
    options: { folder: value },
    via: 'api',
  },
  {
    name: 'tests import',
    synopsis: '[--app ID] FILE',
    help:
      "import a JSON array of tests → their ids; --app sets every test's application (the one whose\n" +
      'environments its runs target), whatever application_id the file gives',
    options: { app: value },
    positionals: ['FILE'],
    via: 'admin',
  },
  {
    name: 'tests heal',
    synopsis: '--run RUN_ID [--write]',
    help:
      "keep a passed run's heals: the diff of its healed steps' selectors (and the elements' outer HTML)\n" +
      "against its test's steps; --write writes them into the test, so its next run needs no healing",
    options: { run: value, write: flag },
    via: 'admin',
  },
  {
    name: 'tests quarantine',
    synopsis: 'TEST --owner NAME --reason TEXT [--until DATE]',
    help:
      'quarantine a run_on_preview test: it still runs and the merge gate lists it, but its failure does\n' +
      'not fail the gate until DATE (YYYY-MM-DD, at most 30 days ahead; default 30 days). At most a fifth\n' +
      "of an application's run_on_preview tests (at least one) at once",
    options: { owner: value, reason: value, until: value },
    positionals: ['TEST'],
    via: 'api',
  },
  {
    name: 'tests unquarantine',
    synopsis: 'TEST',
    help: "end a test's quarantine now: its failures fail the merge gate again",
    options: {},
    positionals: ['TEST'],
    via: 'api',
  },
  {
    name: 'tests quarantined',
    synopsis: '[--application ID]',
    help: "the organization's quarantined tests: owner, reason, until",
    options: { application: value },
    via: 'api',
  },
  {
    name: 'gate skip',
    synopsis: `${env} --reason TEXT [--by NAME]`,
    help:
      "skip the merge gate of the pull request's head: its `Preview tests` check run completes neutral,\n" +
      'naming who (--by, default your user name) and why, as a `/preview skip-tests <reason>` comment does',
    options: { repo: value, pr: value, reason: value, by: value },
    via: 'api',
  },
  {
    name: 'runs start',
    synopsis: 'TEST [--env ENVIRONMENT_ID] [--var NAME=VALUE]... [--wait] [--timeout SECONDS]',
    help:
      'start a run of a test → its id and report link; --env: the environment to run against (else the\n' +
      "test's application's), --var overrides a variable; --wait: until passed (exit 0) or failed (exit 1)",
    options: { env: value, var: list, wait: flag, timeout: value },
    positionals: ['TEST'],
    via: 'api',
  },
  {
    name: 'runs list',
    synopsis: '[--test ID] [--status pending|running|passed|failed] [--limit N]',
    help: "the organization's test runs, newest first (default 20, at most 100)",
    options: { test: value, status: value, limit: value },
    via: 'api',
  },
  {
    name: 'runs get',
    synopsis: 'RUN',
    help: 'one run with its steps (RUN may also be given as --run RUN)',
    options: { run: value },
    positionals: ['RUN?'],
    via: 'api',
  },
  {
    name: 'runs report',
    synopsis: 'RUN',
    help: "a fresh link to the run's report (opens without credentials for 7 days)",
    options: { run: value },
    positionals: ['RUN?'],
    via: 'api',
  },
  {
    name: 'runs wait',
    synopsis: 'RUN [--timeout SECONDS]',
    help: 'poll until the run has passed (exit 0) or failed (exit 1), a progress line on stderr per change',
    options: { run: value, timeout: value },
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
    options: { file: value },
    via: 'admin',
  },
];
/** Options every command takes. */
export const GLOBAL_OPTIONS: Record<string, OptionSpec> = {
  org: value,
  json: flag,
  help: { type: 'boolean', short: 'h' },
};
