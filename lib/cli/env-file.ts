import { parse } from 'dotenv';
import { UsageError } from './args.js';

/*
 * An env file for `previewctl secrets set --from-env-file`, read by dotenv's parser, the one the files are
 * written for: `#` comments (a whole line, or after an unquoted value), `export ` prefixes, single, double
 * and backtick quotes, `\n` and `\r` in a double-quoted value, values over several lines inside quotes (a
 * PEM key), CRLF line ends; a key set twice keeps its last value.
 *
 * dotenv skips a line it cannot read without a word, so a check runs first: every line is blank, a
 * comment, `[export ]KEY=…`, or inside a quoted value opened on an earlier line; anything else is a usage
 * error naming the line by its number only (its text may be a value). So is an unquoted value with a
 * `#` that no space precedes (`pa#ss`), which dotenv would cut short at the `#`. Nothing is sent unless
 * the whole file passes.
 */

/** A key as dotenv reads one: letters, digits, `_`, `.` and `-`. */
const ASSIGNMENT = /^(?:export\s+)?([\w.-]+)\s*=(.*)$/;

/** The secrets of an env file's text, in the file's order; `name` is how errors name the file. */
export function parseEnvFile(text: string, name: string): { key: string; value: string }[] {
  const lines = text.split(/\r?\n/);
  const keys: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? '').trim();
    if (!line || line.startsWith('#')) continue;
    const m = ASSIGNMENT.exec(line);
    if (!m) throw new UsageError(`${name}:${i + 1}: not a KEY=VALUE line`);
    keys.push(m[1]!);
    const raw = m[2]!;
    const value = raw.trimStart();
    const quote = value[0];
    if (quote !== '"' && quote !== "'" && quote !== '`') {
      // dotenv ends an unquoted value at its first `#`: `pa#ss` would be stored as `pa`, a secret cut
      // short without a word. A `#` after a space is the comment the writer meant; any other is refused.
      if (/(^|\S)#/.test(raw))
        throw new UsageError(
          `${name}:${i + 1}: a # in an unquoted value starts a comment: quote the value, or put a space before the comment`,
        );
      continue;
    }
    if (closes(value.slice(1), quote)) continue;
    // A quoted value over several lines: it ends on the first later line that holds its closing quote.
    const opened = i;
    do i++;
    while (i < lines.length && !closes(lines[i]!, quote));
    if (i >= lines.length) throw new UsageError(`${name}:${opened + 1}: the quoted value is never closed`);
  }
  const parsed = parse(text);
  const items: { key: string; value: string }[] = [];
  for (const key of new Set(keys)) {
    const value = parsed[key];
    // The check and dotenv disagree on a line (a case the check does not know): refuse, not lose it.
    if (value === undefined) throw new UsageError(`${name}: ${key} could not be read`);
    items.push({ key, value });
  }
  return items;
}

/** Whether `rest` (what follows an opening quote) holds the closing `quote`, not escaped by a backslash. */
function closes(rest: string, quote: string): boolean {
  for (let j = 0; j < rest.length; j++) {
    if (rest[j] === '\\') j++;
    else if (rest[j] === quote) return true;
  }
  return false;
}
