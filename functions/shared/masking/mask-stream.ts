import { StringDecoder } from 'node:string_decoder';
import { maskedForms, maskSecrets } from './mask.js';

/**
 * Masking secret values in output as it is written (an app's or a build's log file), not only when it is
 * read back: the file itself never holds a value in any of the forms `maskedForms` knows.
 *
 * Output arrives in chunks that may split a value (or a UTF-8 character) anywhere. What is written is
 * masked up to a cut; the text after the cut is held back until more output arrives (or the stream ends),
 * and the cut is placed so that neither a value that may still be completed (the end of the text is the
 * beginning of some form) nor a value that crosses it is split. So only text that could still become part
 * of a value waits: an idle app's last line is in the file at once, unless it ends with the first
 * characters of a secret.
 */
export class MaskingWriter {
  private readonly forms: string[];
  private readonly longest: number;
  private held = '';
  private readonly decoders = new Map<string, StringDecoder>();

  /** `write`: where masked text goes (synchronously, in order). */
  constructor(
    private readonly values: string[],
    private readonly write: (text: string) => void,
  ) {
    const forms = new Set<string>();
    for (const value of values) for (const form of maskedForms(value)) forms.add(form);
    this.forms = [...forms];
    this.longest = Math.max(0, ...this.forms.map((f) => f.length));
  }

  /** Output from `source` (one decoder per source: stdout and stderr may each split a character). */
  push(chunk: Buffer | string, source = 'out'): void {
    let text: string;
    if (typeof chunk === 'string') text = chunk;
    else {
      let decoder = this.decoders.get(source);
      if (!decoder) {
        decoder = new StringDecoder('utf8');
        this.decoders.set(source, decoder);
      }
      text = decoder.write(chunk);
    }
    if (!text) return;
    if (this.forms.length === 0) {
      this.write(text);
      return;
    }
    const all = this.held + text;
    const cut = this.cutPoint(all);
    this.held = all.slice(cut);
    if (cut > 0) this.write(maskSecrets(all.slice(0, cut), this.values));
  }

  /** The stream ended: what was held back is written (masked: a value it begins can no longer complete). */
  end(): void {
    let rest = this.held;
    for (const decoder of this.decoders.values()) rest += decoder.end();
    this.held = '';
    this.decoders.clear();
    if (rest) this.write(this.forms.length ? maskSecrets(rest, this.values) : rest);
  }

  /**
   * Where to cut `text`: before the longest suffix that is the beginning of a form (it may be completed
   * by the next chunk), and then before any occurrence of a form that the cut would split.
   */
  private cutPoint(text: string): number {
    let cut = text.length;
    for (let p = Math.max(0, text.length - this.longest + 1); p < text.length; p++) {
      const suffix = text.slice(p);
      if (this.forms.some((f) => f.length > suffix.length && f.startsWith(suffix))) {
        cut = p;
        break;
      }
    }
    // An occurrence that starts before the cut and ends after it: cut before it (and again for one that
    // crosses the new cut; each round moves the cut back, so this ends).
    for (let moved = true; moved && cut > 0; ) {
      moved = false;
      for (const form of this.forms) {
        const from = Math.max(0, cut - form.length + 1);
        const at = text.indexOf(form, from);
        if (at >= 0 && at < cut && at + form.length > cut) {
          cut = at;
          moved = true;
        }
      }
    }
    return cut;
  }
}
