/**
 * Failure messages that lead with the real cause. A crash or a failed build ends its output with noise (a
 * Node crash: `requireStack: [ … ] }` and `Node.js v20.x`; npm: `npm error code ENOENT`, `npm error A
 * complete log of this run…`), so the last lines rarely say why. `leadingCause` finds the lines that do;
 * `failureMessage` puts them first, then what failed, then the CLI command that prints the full log.
 *
 * The search, over the last `CAUSE_WINDOW_LINES` lines of the output that are not noise (ANSI colours
 * removed; the runtime's own `--- … ---` headers, stack frames, a Node error's property dump, the
 * `Node.js v…` footer and the package manager's boilerplate skipped: npm's `code`, `errno`, `syscall`,
 * `path`, `A complete log…`, `This is related to…`, warnings and notices; CodeBuild's `[Container]` lines):
 * 1. a Python traceback: the exception line that ends it (the first unindented line after
 *    `Traceback (most recent call last):`);
 * 2. else the first line that names an error or exception (`Error: …`, `TypeError: …`,
 *    `Error [ERR_MODULE_NOT_FOUND]: …`, `ModuleNotFoundError: …`, `java.lang.IllegalStateException: …`,
 *    `panic: …`, `fatal: …`, `FATAL …`);
 * 3. else the first line with one inside (`npm error enoent Could not read package.json: Error: ENOENT: …`);
 * 4. else the first weaker sign (`error: …`, `error TS2304: …`, `npm ERR! …`, `npm error …`,
 *    `…: command not found`, `…: not found`, `No such file or directory`, `Segmentation fault`).
 * The line found, and the next one when it is a sign too (a second compiler error), are quoted, npm's
 * `npm error <code>` prefix left out. None found: undefined (the caller quotes the last lines instead).
 */
import type { LogSource, LogTarget } from './port.js';

/** Longest cause quoted (characters). */
export const MAX_CAUSE_CHARS = 300;
/** How many lines (noise left out) from the end of the output are searched: the cause is near the end. */
export const CAUSE_WINDOW_LINES = 60;
/** How many lines a cause quotes at most. */
const CAUSE_LINES = 2;

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes of a tool's output
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;
const NOISE = [
  /^--- .* ---$/,
  /^\s+at \S/,
  /^\s*(?:code|errno|syscall|requireStack|signal|killed):\s/,
  /^\s*[}\]]\s*$/,
  /^Node\.js v\d/,
  // CodeBuild's own lines (`[Container] … Phase complete: BUILD State: FAILED`): never the app's cause.
  /^\[Container\] /,
  /^\s*npm (?:ERR!|error) (?:code|errno|syscall|path|signal|command|cwd|workspace|location)\b/,
  /^\s*npm (?:ERR!|error) (?:\w+ )?(?:A complete log of this run|This is related to|Log files were not written|You can rerun the command|$)/,
  /^\s*npm (?:ERR!|error)(?: [\w-]+)?\s*$/,
  /^\s*npm (?:WARN|warn|notice)\b/,
];
const STRONG = [
  /^\s*(?:Uncaught\s+)?(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Error|Exception)(?:\s*\[[\w-]+\])?:\s*\S/,
  /^\s*Error(?:\s*\[[\w-]+\])?:\s*\S/,
  /^\s*(?:panic|fatal|FATAL|Fatal error|FATAL ERROR)[:\s]\s*\S/,
];
const INSIDE = [/\b(?:[A-Z][\w$]*)?(?:Error|Exception)(?:\s*\[[\w-]+\])?: \S/];
const WEAK = [
  /\b(?:error|ERROR)(?:\[\w+\])?:\s*\S/,
  /\berror TS\d+:/,
  /^\s*npm (?:ERR!|error)\s+\S/,
  /: (?:command )?not found\s*$/,
  /No such file or directory/,
  /^\s*Segmentation fault/,
];
const SIGNS = [...STRONG, ...INSIDE, ...WEAK];
const NPM_CODE = /^\s*npm (?:ERR!|error) code\b/;
const NPM_LINE = /^\s*npm (?:ERR!|error) /;
/** After npm's prefix, `enoent ` before a sentence: the error's code, not the cause. */
const NPM_CODE_WORD = /^[a-z][\w-]* (?=[A-Z])/;

/** The lines of `output` that say why it failed (see the file comment), trimmed and capped; or undefined. */
export function leadingCause(output: string): string | undefined {
  const all = output
    .replace(ANSI, '')
    .split(/\r?\n|\r/)
    .filter((l) => l.trim() !== '' && !NOISE.some((p) => p.test(l)));
  const lines = all.slice(-CAUSE_WINDOW_LINES);
  const tidy = (line: string) => {
    const t = line.trim();
    return NPM_LINE.test(t) ? t.replace(NPM_LINE, '').replace(NPM_CODE_WORD, '') : t;
  };
  const cap = (text: string) =>
    text.length > MAX_CAUSE_CHARS ? `${text.slice(0, MAX_CAUSE_CHARS - 1)}…` : text;
  /** The line at `at` of `from`, and the next when it is a sign too. */
  const quote = (from: string[], at: number) => {
    const quoted = [tidy(from[at]!)];
    for (const next of from.slice(at + 1, at + CAUSE_LINES)) {
      if (!SIGNS.some((p) => p.test(next)) || quoted.includes(tidy(next))) break;
      quoted.push(tidy(next));
    }
    return cap(quoted.join(' | '));
  };
  const traceback = lines.findIndex((l) => l.trim().startsWith('Traceback (most recent call last):'));
  if (traceback >= 0) {
    const end = lines.slice(traceback + 1).find((l) => !/^\s/.test(l));
    if (end) return cap(tidy(end));
  }
  for (const patterns of [STRONG, INSIDE]) {
    const at = lines.findIndex((l) => patterns.some((p) => p.test(l)));
    if (at >= 0) return quote(lines, at);
  }
  // npm says why right after its `npm error code …` line (however long the usage text that follows).
  const npmAt = npmMessageAt(output, all);
  if (npmAt >= 0) return quote(all, npmAt);
  const at = lines.findIndex((l) => WEAK.some((p) => p.test(l)));
  return at >= 0 ? quote(lines, at) : undefined;
}

/** Where, in `kept` (the lines that are not noise), npm's message after its last `code` line is; or -1. */
function npmMessageAt(output: string, kept: string[]): number {
  const raw = output.replace(ANSI, '').split(/\r?\n|\r/);
  const code = raw.findLastIndex((l) => NPM_CODE.test(l));
  if (code < 0) return -1;
  const message = raw
    .slice(code + 1)
    .find((l) => NPM_LINE.test(l) && !NOISE.some((p) => p.test(l)) && l.trim() !== '');
  return message === undefined ? -1 : kept.lastIndexOf(message);
}

/**
 * The CLI command that prints an app's log (`source=build`: its latest build's); see docs/cli.md. The
 * API route it reads is `GET /v1/preview/environments/{owner}/{repo}/{pr}/apps/{app}/logs`.
 */
export function logsCommand(
  target: Pick<LogTarget, 'repoFullName' | 'prNumber'>,
  app: string,
  source: LogSource,
) {
  const build = source === 'build' ? ' --source build' : '';
  return `previewctl envs logs ${app} --repo ${target.repoFullName} --pr ${target.prNumber}${build}`;
}

/**
 * `<cause> (<what failed>); full log: <CLI command>` when the output names a cause; otherwise
 * `<what failed>; last output: <last lines>; full log: <CLI command>`. `lastLines` is already masked and
 * one line (` | `-joined); `output` must be masked too.
 */
export function failureMessage(
  what: string,
  output: string,
  lastLines: string,
  where: { target: Pick<LogTarget, 'repoFullName' | 'prNumber'>; app: string; source: LogSource },
): string {
  const full = `full log: ${logsCommand(where.target, where.app, where.source)}`;
  const cause = leadingCause(output);
  if (cause) return `${cause} (${what}); ${full}`;
  return `${what}; last output: ${lastLines || '(no output)'}; ${full}`;
}
