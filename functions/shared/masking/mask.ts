/**
 * Masking secret values in text we quote back to callers (status errors, logs, run outputs).
 *
 * The whole text is masked at once, before it is split into lines or cut to a length, so a multi-line
 * value (a PEM key) is caught whole. Besides each value as it is, its common encodings are masked too:
 * JSON-escaped (a value inside a logged JSON document), URL-encoded (a value in a query string or a
 * connection URL), base64 and base64url (a value in a Basic auth header, a k8s-style secret dump). Each
 * line of a multi-line value is masked on its own as well (longer lines only), so a partial print (a PEM
 * whose first lines were cut off) shows none of the lines that are there.
 *
 * Values shorter than `MIN_MASKED_LENGTH` are ignored: masking every `1` or `on` in an output would make
 * it unreadable and would itself tell the reader the value (every masked spot is where it occurred); a
 * secret that short protects nothing anyway.
 */

export const MASK = '[secret]';
/** Values (and encodings) shorter than this are not masked (see above). */
export const MIN_MASKED_LENGTH = 4;
/** Lines of a multi-line value at least this long are masked on their own too. */
export const MIN_MASKED_LINE_LENGTH = 8;

/** Every string a value may appear as in output, without duplicates. */
export function maskedForms(value: string): string[] {
  if (value.length < MIN_MASKED_LENGTH) return [];
  const forms = new Set<string>();
  const add = (form: string, min = MIN_MASKED_LENGTH) => {
    if (form.length >= min) forms.add(form);
  };
  const encodings = (v: string, min?: number) => {
    add(v, min);
    add(JSON.stringify(v).slice(1, -1), min);
    add(encodeURIComponent(v), min);
    // A form encoder writes spaces as `+`.
    add(encodeURIComponent(v).replace(/%20/g, '+'), min);
  };
  encodings(value);
  const bytes = Buffer.from(value, 'utf8');
  const base64 = bytes.toString('base64');
  add(base64);
  add(base64.replace(/=+$/, ''));
  add(bytes.toString('base64url'));
  const lines = value.split(/\r?\n|\r/);
  if (lines.length > 1) {
    for (const line of lines) {
      const trimmed = line.trim();
      if (trimmed.length >= MIN_MASKED_LINE_LENGTH) encodings(trimmed, MIN_MASKED_LINE_LENGTH);
    }
  }
  return [...forms];
}

/**
 * `text` with every value of `values` (and each of its forms, see `maskedForms`) replaced by `[secret]`,
 * longest first, so a value that contains another is masked whole.
 */
export function maskSecrets(text: string, values: Iterable<string>): string {
  const needles = new Set<string>();
  for (const value of values) for (const form of maskedForms(value)) needles.add(form);
  if (needles.size === 0 || text.length === 0) return text;
  // Longest first, so a value containing another is masked whole. Masks are written as a placeholder
  // character found in neither the text nor any form, so a later (shorter) form never matches inside one;
  // they become `[secret]` at the end.
  const sorted = [...needles].sort((a, b) => b.length - a.length);
  const placeholder = unusedChar(text, sorted);
  let masked = text;
  for (const needle of sorted) if (masked.includes(needle)) masked = masked.split(needle).join(placeholder);
  return masked.split(placeholder).join(MASK);
}

/** A private-use character that occurs in none of `texts`. */
function unusedChar(...texts: (string | string[])[]): string {
  const all = texts.flat();
  for (let code = 0xe000; ; code++) {
    const c = String.fromCharCode(code);
    if (!all.some((t) => t.includes(c))) return c;
  }
}
