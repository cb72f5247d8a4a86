/**
 * Failure messages that lead with the real cause. A crash or a failed build ends its output with noise (a
 * Node crash: `requireStack: [ … ] }` and `Node.js v20.x`; npm: `npm ERR! A complete log of this run…`),
 * so the last lines rarely say why. `leadingCause` finds the line that does; `failureMessage` puts it
 * first, then what failed, then where the full log is (`logsPath`).
 *
 * The search, over the output's lines (ANSI colours removed, the runtime's own `--- … ---` headers
 * skipped):
 * 1. a Python traceback: the exception line that ends it (the first unindented line after
 *    `Traceback (most recent call last):`);
 * 2. else the first line that names an error or exception (`Error: …`, `TypeError: …`,
 *    `Error [ERR_MODULE_NOT_FOUND]: …`, `ModuleNotFoundError: …`, `java.lang.IllegalStateException: …`,
 *    `panic: …`, `fatal: …`, `FATAL …`);
 * 3. else the first weaker sign (`error: …`, `error TS2304: …`, `npm ERR! …`, `npm error …`,
 *    `…: command not found`, `…: not found`, `No such file or directory`, `Segmentation fault`).
 * None found: undefined (the caller quotes the last lines instead).
 */
import type { LogSource, LogTarget } from './port.js';

/** Longest cause quoted (characters). */
export const MAX_CAUSE_CHARS = 300;

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes of a tool's output
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;
const HEADER = /^--- .* ---$/;
const STRONG = [
  /^\s*(?:Uncaught\s+)?(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Error|Exception)(?:\s*\[[\w-]+\])?:\s*\S/,
  /^\s*Error(?:\s*\[[\w-]+\])?:\s*\S/,
  /^\s*(?:panic|fatal|FATAL|Fatal error|FATAL ERROR)[:\s]\s*\S/,
];
const WEAK = [
  /\b(?:error|ERROR)(?:\[\w+\])?:\s*\S/,
  /\berror TS\d+:/,
  /^\s*npm (?:ERR!|error)\s+\S/,
  /: (?:command )?not found\s*$/,
  /No such file or directory/,
  /^\s*Segmentation fault/,
];

/** The line of `output` that says why it failed (see the file comment), trimmed and capped; or undefined. */
export function leadingCause(output: string): string | undefined {
  const lines = output
    .replace(ANSI, '')
    .split(/\r?\n|\r/)
    .filter((l) => l.trim() !== '' && !HEADER.test(l.trim()));
  const cap = (line: string) => {
    const t = line.trim();
    return t.length > MAX_CAUSE_CHARS ? `${t.slice(0, MAX_CAUSE_CHARS - 1)}…` : t;
  };
  const traceback = lines.findIndex((l) => l.trim().startsWith('Traceback (most recent call last):'));
  if (traceback >= 0) {
    const end = lines.slice(traceback + 1).find((l) => !/^\s/.test(l));
    if (end) return cap(end);
  }
  for (const patterns of [STRONG, WEAK]) {
    const hit = lines.find((l) => patterns.some((p) => p.test(l)));
    if (hit) return cap(hit);
  }
  return undefined;
}

/** The API path of an app's log (`source=build`: its latest build's), relative to the API's base URL. */
export function logsPath(
  target: Pick<LogTarget, 'repoFullName' | 'prNumber'>,
  app: string,
  source: LogSource,
) {
  const query = source === 'build' ? '?source=build' : '';
  return `/v1/preview/environments/${target.repoFullName}/${target.prNumber}/apps/${app}/logs${query}`;
}

/**
 * `<cause> (<what failed>); full log: GET <path>` when the output names a cause; otherwise
 * `<what failed>; last output: <last lines>; full log: GET <path>`. `lastLines` is already masked and one
 * line (` | `-joined); `output` must be masked too.
 */
export function failureMessage(
  what: string,
  output: string,
  lastLines: string,
  where: { target: Pick<LogTarget, 'repoFullName' | 'prNumber'>; app: string; source: LogSource },
): string {
  const full = `full log: GET ${logsPath(where.target, where.app, where.source)}`;
  const cause = leadingCause(output);
  if (cause) return `${cause} (${what}); ${full}`;
  return `${what}; last output: ${lastLines || '(no output)'}; ${full}`;
}
