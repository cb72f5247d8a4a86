/*
 * Just enough Markdown for the docs tests: fenced blocks, headings and their GitHub anchors, links, and the
 * `<!-- newcomer-test: NAME -->` markers that say which shell blocks of the README the newcomer test runs.
 */

export interface Line {
  /** 1-based line number in the file. */
  no: number;
  text: string;
  /** Whether the line is inside a fenced code block (the fence lines themselves included). */
  inFence: boolean;
}

/** The file's lines, each marked as in a fenced code block (``` or ~~~, any length ≥ 3) or not. */
export function lines(markdown: string): Line[] {
  let fence: string | undefined;
  return markdown.split('\n').map((text, i) => {
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(text);
    if (fence === undefined && open) {
      fence = open[1]!;
      return { no: i + 1, text, inFence: true };
    }
    if (fence !== undefined) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(text)) fence = undefined;
      return { no: i + 1, text, inFence: true };
    }
    return { no: i + 1, text, inFence: false };
  });
}

/**
 * GitHub's anchor for a heading's text: markup dropped, lower-cased, every character that is not a letter,
 * a digit, a space, `-` or `_` removed, spaces turned into `-`.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '') // code spans, emphasis
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Every anchor a file offers: its headings' slugs (a repeated one gets `-1`, `-2`, …) and HTML ids/names. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of lines(markdown)) {
    if (line.inFence) continue;
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line.text);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  }
  return out;
}

export interface Link {
  line: number;
  target: string;
}

/** Inline links and images outside code (`[text](target)`, `![alt](target)`), and `<url>` autolinks. */
export function links(markdown: string): Link[] {
  const out: Link[] = [];
  for (const line of lines(markdown)) {
    if (line.inFence) continue;
    const text = line.text.replace(/`[^`]*`/g, '``'); // a code span is no link
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      out.push({ line: line.no, target: m[1]! });
    for (const m of text.matchAll(/<((?:https?|mailto):[^>\s]+)>/g))
      out.push({ line: line.no, target: m[1]! });
  }
  return out;
}

export interface MarkedBlock {
  /** The marker's name: `<!-- newcomer-test: NAME -->`. */
  name: string;
  /** Line of the marker. */
  line: number;
  /** The block's body, fences excluded. */
  code: string;
}

/**
 * Every fenced block preceded by a `<!-- newcomer-test: NAME -->` marker (blank lines between them
 * allowed), in file order. A marker that is not followed by a fenced block throws: the README and the test
 * must not drift apart silently.
 */
export function markedBlocks(markdown: string): MarkedBlock[] {
  const all = lines(markdown);
  const out: MarkedBlock[] = [];
  for (let i = 0; i < all.length; i++) {
    const m = /^<!--\s*newcomer-test:\s*([\w-]+)\s*-->\s*$/.exec(all[i]!.text);
    if (!m || all[i]!.inFence) continue;
    let j = i + 1;
    while (j < all.length && all[j]!.text.trim() === '') j++;
    const open = all[j] ? /^ {0,3}(`{3,}|~{3,})\s*(\w*)/.exec(all[j]!.text) : null;
    if (!open || !['sh', 'bash', 'shell', ''].includes(open[2]!))
      throw new Error(`line ${all[i]!.no}: marker "${m[1]}" is not followed by a shell code block`);
    const body: string[] = [];
    let k = j + 1;
    while (k < all.length && all[k]!.inFence && !/^ {0,3}(`{3,}|~{3,})\s*$/.test(all[k]!.text)) {
      body.push(all[k]!.text);
      k++;
    }
    out.push({ name: m[1]!, line: all[i]!.no, code: body.join('\n') });
    i = k;
  }
  return out;
}
