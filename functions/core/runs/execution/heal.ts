import type { ElementFeatures } from '../../../ports/browser/port.js';

/*
 * Healing a step: when a step's recorded selector matches nothing, find the element its recording
 * describes (`element.html`, the instruction) among the page's elements and act on that one instead.
 * This module is the pure part: the page's elements arrive as feature records (the browser port collects
 * them in one round trip, `ports/browser/element-features.ts`); here they are scored, the verdict taken
 * (a threshold and a margin over the runner-up: two look-alikes are never guessed between), and the new
 * selector proposed in Playwright's order of preference (test id, role and name, placeholder, text, CSS).
 *
 * The score is a weighted similarity over what the recording kept (after Similo: many attributes, each
 * compared on its own terms, none decisive alone), divided by the weights of the attributes the
 * recording has, so a sparse recording is judged on what it says. An element that cannot do the step's
 * action is not a candidate (text typed into a div); healing changes where a step acts, never what it
 * checks.
 */

/** What a recording says of its element: the recorded element's features, and the instruction's words. */
export interface HealTarget {
  recorded?: ElementFeatures;
  /** The words of the instruction naming the element (`Click "Sign up"` → `Sign up`); may be empty. */
  cue: string;
  /** The step's interaction (`click`, `input-text`…): what a candidate must be able to do. */
  kind: string;
}

export interface Scored {
  index: number;
  score: number;
  features: ElementFeatures;
}

/** The verdict: the element to act on, or why none (with the closest candidates, for the step's output). */
export type HealVerdict = { chosen: Scored; runnerUp?: Scored } | { chosen?: undefined; closest: Scored[] };

/** A heal is kept at this score or more... */
export const HEAL_THRESHOLD = 0.6;
/** ...and only this far ahead of the runner-up (a near-tie is never guessed). */
export const HEAL_MARGIN = 0.12;
/** A heal from the instruction alone (no recorded HTML) counts for this much of its similarity. */
export const CUE_ONLY_CONFIDENCE = 0.85;

const WEIGHTS = {
  testId: 3,
  id: 2,
  name: 2.5,
  tag: 1.5,
  type: 1,
  classes: 1.5,
  placeholder: 2,
  ariaLabel: 2.5,
  aria: 1,
  role: 1,
  label: 2,
  href: 2,
  text: 3,
  alt: 1.5,
  title: 1,
  cue: 2,
} as const;

const norm = (s: string | undefined) => (s ?? '').replace(/\s+/g, ' ').trim().toLowerCase();
const tokens = (s: string) =>
  norm(s)
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);

/** Token similarity of two texts (Jaccard over words; equal texts 1, either empty 0). */
export function textSimilarity(a: string | undefined, b: string | undefined): number {
  const x = norm(a);
  const y = norm(b);
  if (!x || !y) return 0;
  if (x === y) return 1;
  const tx = tokens(x);
  const ty = tokens(y);
  // Texts without a word (`×`, `_`) are alike only when equal.
  return tx.length && ty.length ? jaccard(tx, ty) : 0;
}

function jaccard(a: string[], b: string[]): number {
  const A = new Set(a);
  const B = new Set(b);
  if (!A.size && !B.size) return 1;
  let both = 0;
  for (const t of A) if (B.has(t)) both++;
  return both / (A.size + B.size - both);
}

/** Identifiers (`email`, `user-email`, `userEmail`): equal 1, sharing words partly, else 0. */
function identSimilarity(a: string, b: string): number {
  if (a === b) return 1;
  const split = (s: string) =>
    s
      .replace(/([a-z])([A-Z])/g, '$1 $2')
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean);
  return 0.8 * jaccard(split(a), split(b));
}

/** `/a/b?x` and `http://h/a/b` compare on their path; the same path and query is 1, the same path 0.7. */
function hrefSimilarity(a: string, b: string): number {
  if (a === b) return 1;
  try {
    const x = new URL(a, 'http://h/');
    const y = new URL(b, 'http://h/');
    if (x.pathname === y.pathname) return x.search === y.search ? 1 : 0.7;
  } catch {
    return 0;
  }
  return 0;
}

/** Whether an element can do a step's action at all (input-text needs something that takes text). */
export function canAct(kind: string, f: ElementFeatures): boolean {
  switch (kind) {
    case 'input-text':
      return f.editable && f.visible;
    case 'click':
    case 'press':
      return f.visible;
    default:
      return true;
  }
}

/**
 * The similarity of a candidate to the recording, 0..1: the weighted sum over the attributes the
 * recording has (the instruction's words counting as one more), over their weights.
 */
export function similarity(target: HealTarget, c: ElementFeatures): number {
  const r = target.recorded;
  let sum = 0;
  let total = 0;
  const add = (weight: number, present: unknown, sim: () => number) => {
    if (!present) return;
    total += weight;
    sum += weight * sim();
  };
  if (r) {
    add(WEIGHTS.testId, r.testId, () => (r.testId === c.testId ? 1 : 0));
    add(WEIGHTS.id, r.id, () => (c.id ? identSimilarity(r.id as string, c.id) : 0));
    add(WEIGHTS.name, r.name, () => (c.name ? identSimilarity(r.name as string, c.name) : 0));
    add(WEIGHTS.tag, r.tag, () => (r.tag === c.tag ? 1 : sameFamily(r.tag, c.tag) ? 0.5 : 0));
    add(WEIGHTS.type, r.type, () => (r.type === c.type ? 1 : 0));
    add(WEIGHTS.classes, r.classes.length, () => jaccard(r.classes, c.classes));
    add(WEIGHTS.placeholder, r.placeholder, () => textSimilarity(r.placeholder, c.placeholder));
    add(WEIGHTS.ariaLabel, r.ariaLabel, () => textSimilarity(r.ariaLabel, c.ariaLabel));
    const aria = Object.keys(r.aria);
    add(WEIGHTS.aria, aria.length, () => aria.filter((k) => r.aria[k] === c.aria[k]).length / aria.length);
    add(WEIGHTS.role, r.role, () => (r.role === c.role ? 1 : 0));
    add(WEIGHTS.label, r.label, () => textSimilarity(r.label, c.label));
    add(WEIGHTS.href, r.href, () => (c.href ? hrefSimilarity(r.href as string, c.href) : 0));
    add(WEIGHTS.text, r.text, () => textSimilarity(r.text, c.text));
    add(WEIGHTS.alt, r.alt, () => textSimilarity(r.alt, c.alt));
    add(WEIGHTS.title, r.title, () => textSimilarity(r.title, c.title));
  }
  // With a recording, the instruction's words count when they describe the recorded element (else
  // they are noise: `Click here`).
  const cue = target.cue && (!r || cueSimilarity(target.cue, r) > 0) ? target.cue : '';
  add(WEIGHTS.cue, cue, () => cueSimilarity(cue, c));
  if (!total) return 0;
  const score = sum / total;
  // From the words alone, a heal is less sure (and prefers what can be acted on: a button, a link).
  if (!r) return score * CUE_ONLY_CONFIDENCE * (c.interactive || !isAction(target.kind) ? 1 : 0.6);
  return score;
}

const isAction = (kind: string) => kind === 'click' || kind === 'press' || kind === 'input-text';

/** `a` ↔ `button` and `input` ↔ `textarea` do the same job under another tag. */
function sameFamily(a: string, b: string): boolean {
  const fam = (t: string) =>
    t === 'a' || t === 'button' ? 'act' : t === 'input' || t === 'textarea' ? 'field' : t;
  return fam(a) === fam(b);
}

/**
 * The instruction's words against what a person reads on the element (its text, label, placeholder,
 * alt) and what names it (name, id): each the better of the texts' similarity and 0.9 × the share of
 * the instruction's words the element has (`close` of `Close dialog`: 0.9).
 */
function cueSimilarity(cue: string, c: ElementFeatures): number {
  const words = tokens(cue);
  const contained = (s: string | undefined) => {
    if (!s || !words.length) return 0;
    const has = new Set(tokens(s.replace(/([a-z])([A-Z])/g, '$1 $2')));
    return (0.9 * words.filter((w) => has.has(w)).length) / words.length;
  };
  return Math.max(
    ...[c.text, c.ariaLabel, c.label, c.placeholder, c.value, c.alt, c.name, c.id].map((s) =>
      Math.max(textSimilarity(cue, s), contained(s)),
    ),
  );
}

/** Every candidate that can do the action, best first. */
export function rankCandidates(target: HealTarget, candidates: ElementFeatures[]): Scored[] {
  return candidates
    .map((features, index) => ({ index, features, score: similarity(target, features) }))
    .filter((s) => s.score > 0 && canAct(target.kind, s.features))
    .sort((a, b) => b.score - a.score || b.features.depth - a.features.depth);
}

/** Whether `a` is an ancestor of `b` among the candidates (each names its nearest candidate ancestor). */
function contains(all: ElementFeatures[], a: number, b: number): boolean {
  for (let p = all[b]?.parent ?? -1, hops = 0; p >= 0 && hops < 1000; p = all[p]?.parent ?? -1, hops++)
    if (p === a) return true;
  return false;
}

/**
 * The verdict over ranked candidates: the best when it scores at least HEAL_THRESHOLD and HEAL_MARGIN
 * more than the runner-up (an element holding the best or held by it, its wrapper, is not a rival).
 */
export function decide(ranked: Scored[], all: ElementFeatures[]): HealVerdict {
  const best = ranked[0];
  if (!best || best.score < HEAL_THRESHOLD) return { closest: ranked.slice(0, 3) };
  const runnerUp = ranked
    .slice(1)
    .find((s) => !contains(all, s.index, best.index) && !contains(all, best.index, s.index));
  if (runnerUp && best.score - runnerUp.score < HEAL_MARGIN)
    return { closest: [best, runnerUp, ...ranked.slice(1).filter((s) => s !== runnerUp)].slice(0, 3) };
  return runnerUp ? { chosen: best, runnerUp } : { chosen: best };
}

const cssString = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\a ')}"`;
const cssIdent = (s: string) => (/^[A-Za-z_][\w-]*$/.test(s) ? s : undefined);

/** The accessible name a role selector would use: aria-label, label, else short text. */
function accessibleName(f: ElementFeatures): string | undefined {
  const name = f.ariaLabel || f.label || (f.tag === 'input' ? f.value : f.text) || f.alt;
  const n = name?.replace(/\s+/g, ' ').trim();
  return n && n.length <= 80 ? n : undefined;
}

/**
 * Selectors for an element in Playwright's order of preference: its test id, its role and accessible
 * name, its placeholder, its text, then CSS (id, name). The browser keeps the first that matches it
 * and nothing else (and falls back to a CSS path when none does).
 */
export function selectorProposals(f: ElementFeatures): string[] {
  const out: string[] = [];
  if (f.testId && f.testIdAttr) out.push(`[${f.testIdAttr}=${cssString(f.testId)}]`);
  const name = accessibleName(f);
  if (f.role && name) out.push(`role=${f.role}[name=${JSON.stringify(name)}]`);
  if (f.placeholder) out.push(`${f.tag}[placeholder=${cssString(f.placeholder)}]`);
  const text = f.text.replace(/\s+/g, ' ').trim();
  if (text && text.length <= 80 && f.tag !== 'input' && f.tag !== 'textarea')
    out.push(`text=${JSON.stringify(text)}`);
  const id = f.id && cssIdent(f.id);
  if (id) out.push(`#${id}`);
  if (f.name) out.push(`${f.tag}[name=${cssString(f.name)}]`);
  return out;
}

/** A candidate as a step's output names it: `input[name="mail"]`, `button#go`, `a "Sign up"`. */
export function describeCandidate(f: ElementFeatures): string {
  if (f.testId && f.testIdAttr) return `${f.tag}[${f.testIdAttr}=${cssString(f.testId)}]`;
  if (f.id && cssIdent(f.id)) return `${f.tag}#${f.id}`;
  if (f.name) return `${f.tag}[name=${cssString(f.name)}]`;
  const words = (f.ariaLabel || f.text || f.placeholder || '').replace(/\s+/g, ' ').trim();
  if (words) return `${f.tag} "${clip(words)}"`;
  return f.classes.length ? `${f.tag}.${f.classes.slice(0, 2).join('.')}` : f.tag;
}

/**
 * At most 30 characters of a text, cut between words only: a word never shows in part (a secret value
 * in the page is masked whole in the step's output, or not shown at all).
 */
function clip(text: string): string {
  if (text.length <= 30) return text;
  let out = '';
  for (const word of text.split(' ')) {
    if (out.length + word.length + 1 > 29) break;
    out = out ? `${out} ${word}` : word;
  }
  return `${out}…`;
}

const two = (n: number) => n.toFixed(2);

/** `#email matched nothing; closest: input[name="mail"] 0.58, input#phone 0.31: none close enough`. */
export function refusedHeal(selector: string, closest: Scored[]): string {
  if (!closest.length) return `${selector} matched nothing; no element of the page is like it`;
  const list = closest.map((s) => `${describeCandidate(s.features)} ${two(s.score)}`).join(', ');
  const tie =
    closest.length > 1 && (closest[0]?.score ?? 0) >= HEAL_THRESHOLD
      ? 'too close to tell apart'
      : 'none close enough';
  return `${selector} matched nothing; closest: ${list}: ${tie}`;
}

/** The start of a healed step's output: `healed: #email → [placeholder="Email"] (0.74)`. */
export const healedLine = (from: string, to: string, score: number) =>
  `healed: ${from} → ${to} (${two(score)})`;

const VERBS =
  /^(?:click|tap|press|select|choose|type|enter|fill|input|check|wait\s+for|assert|verify|see|open|find|on|in|into|the|a|an|button|link|field|element|visible|appears?)\b\s*/i;

/**
 * The words of an instruction naming its element: the quoted text, else the instruction without its
 * leading verb and articles (`Click the Sign up button` → `Sign up button`). For `input-text` and
 * `assert-text` the quoted text is the value or the expected text, not a name: only the rest counts.
 */
export function instructionCue(instruction: string, kind: string): string {
  const quoted = /"([^"]*)"|“([^”]*)”/.exec(instruction);
  const valueQuoted = kind === 'input-text' || kind === 'assert-text' || kind === 'press';
  if (quoted && !valueQuoted) return (quoted[1] ?? quoted[2] ?? '').trim();
  let rest = instruction
    .replace(/"[^"]*"|“[^”]*”/g, ' ')
    .replace(/\{\{[^}]*\}\}/g, ' ')
    .trim();
  for (let i = 0; i < 6; i++) {
    const next = rest.replace(VERBS, '');
    if (next === rest) break;
    rest = next;
  }
  return rest.replace(/\s*\b(?:button|link|field|box|banner|notice|message|heading|section)\s*$/i, '').trim();
}
