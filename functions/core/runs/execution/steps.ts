import type { BrowserSession } from '../../../ports/browser/port.js';
import { navigationRefused, originAllowed, runOrigins } from '../../../shared/origins.js';
import type { HealedStep, RunStepItem, RunTarget } from '../store.js';
import {
  decide,
  healedLine,
  instructionCue,
  rankCandidates,
  refusedHeal,
  selectorProposals,
} from './heal.js';

/*
 * The steps of a test and what each does (README, "Tests and runs"). A run opens its first page, then
 * performs the steps in order; after the first failure every later step is `skipped`. Each step that ran
 * records its output, the page's URL after it and a PNG screenshot.
 */

export const INTERACTIONS = [
  'navigate',
  'click',
  'input-text',
  'assert-text',
  'assert-visible',
  'wait-for',
  'press',
] as const;
export type Interaction = (typeof INTERACTIONS)[number];

/** The viewport of every run (and so of its screenshots and video). */
export const VIEWPORT = { width: 1280, height: 720 };

/** A step's failure, with the output to record (already readable: no stack). */
export class StepFailure extends Error {
  override name = 'StepFailure';
}

const VARIABLE_RE = /\{\{\s*variable:([^}]*?)\s*\}\}/g;
const QUOTED_RE = /"([^"]*)"|“([^”]*)”/;

/** `input-text`, `Input_Text`, `input text` → `input-text`. */
export const normalizeInteraction = (interaction: string): string =>
  interaction
    .trim()
    .toLowerCase()
    .replace(/[\s_]+/g, '-');

/** Replace each `{{variable:NAME}}` by its value; an unknown name fails the step, naming it. */
export function substituteVariables(text: string, variables: Record<string, string>): string {
  return text.replace(VARIABLE_RE, (_whole, name: string) => {
    if (!Object.hasOwn(variables, name)) throw new StepFailure(unknownVariable(name, variables));
    return variables[name] as string;
  });
}

function unknownVariable(name: string, variables: Record<string, string>): string {
  const known = Object.keys(variables).sort();
  return `unknown variable "${name}" (the test saves ${known.length ? known.join(', ') : 'no variables'})`;
}

/** The first quoted text of an instruction ("…" or “…”), variables substituted; undefined when none. */
export function quotedText(instruction: string, variables: Record<string, string>): string | undefined {
  const m = QUOTED_RE.exec(instruction);
  if (!m) return undefined;
  return substituteVariables(m[1] ?? m[2] ?? '', variables);
}

/**
 * What `input-text` types: the quoted text of the instruction (variables substituted), else the value of
 * the first `{{variable:NAME}}` in it.
 */
export function inputValue(instruction: string, variables: Record<string, string>): string {
  const quoted = quotedText(instruction, variables);
  if (quoted !== undefined) return quoted;
  const m = new RegExp(VARIABLE_RE.source).exec(instruction);
  if (!m)
    throw new StepFailure('input-text needs a value in its instruction: {{variable:NAME}} or "quoted text"');
  const name = m[1] ?? '';
  if (!Object.hasOwn(variables, name)) throw new StepFailure(unknownVariable(name, variables));
  return variables[name] as string;
}

/** The key `press` presses: the quoted text of the instruction, else its last word (`Press Enter`). */
export function keyOf(instruction: string, variables: Record<string, string>): string {
  const quoted = quotedText(instruction, variables);
  if (quoted) return quoted;
  const words = instruction.trim().split(/\s+/);
  const last = words[words.length - 1];
  if (!last) throw new StepFailure('press needs a key in its instruction ("Enter", or Press Tab)');
  return last;
}

/** A navigate URL against the run's app: relative ones resolve against the app's URL; empty is the first page. */
export function navigateUrl(url: string, target: Pick<RunTarget, 'url' | 'appUrl'>): string {
  if (!url.trim()) return target.url;
  return new URL(url.trim(), target.appUrl.replace(/\/*$/, '/')).href;
}

/**
 * The origins a run's browser may load (run confinement): its environment's app URLs and its application's
 * allowed origins, as Prepare resolved them; a target prepared before they were recorded gets its app
 * URLs only.
 */
export function targetOrigins(target: Pick<RunTarget, 'appUrl' | 'urls' | 'origins'>): string[] {
  return target.origins ?? runOrigins([target.appUrl, ...Object.values(target.urls ?? {})]);
}

/**
 * Where a navigate step goes: its URL with variables substituted, resolved against the app URL, and
 * refused (a StepFailure naming only its scheme and host) unless its origin is one the run may load:
 * an absolute URL, a `//host` one (`"/{{variable:P}}"` with `P=/127.0.0.1:4200/…`) and `file:`,
 * `javascript:`, `data:` or `chrome:` ones all end here.
 */
export function navigateTarget(
  raw: string,
  variables: Record<string, string>,
  target: Pick<RunTarget, 'url' | 'appUrl' | 'urls' | 'origins'>,
): string {
  const substituted = substituteVariables(raw, variables);
  let url: string;
  try {
    url = navigateUrl(substituted, target);
  } catch {
    throw new StepFailure('navigate needs a URL or a path of the app');
  }
  if (!originAllowed(url, targetOrigins(target))) throw new StepFailure(navigationRefused(url));
  return url;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** The first lines of a browser error: what went wrong and what it was waiting for, without a stack. */
export function browserError(err: unknown): string {
  if (err instanceof StepFailure) return err.message;
  const message = err instanceof Error ? err.message : String(err);
  const lines = message
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colours of Playwright's call log
    .replace(/\u001b\[[0-9;]*m/g, '')
    .split('\n')
    .map((l) => l.trim().replace(/^- /, ''))
    .filter((l) => l && !/^=+/.test(l) && !/^at /.test(l) && l !== 'Call log:');
  return lines.slice(0, 3).join(' | ').slice(0, 1000) || 'unknown browser error';
}

function requireSelector(step: RunStepItem, kind: string): string {
  const selector = step.element?.selector?.trim();
  if (!selector) throw new StepFailure(`${kind} needs element.selector`);
  return selector;
}

/** Wait for `sel` to be visible; a timeout is the step's failure (`<sel> <failed> within <t>`). */
async function visibleOrFail(
  session: BrowserSession,
  sel: string,
  t: number,
  failed: string,
  shown = t,
): Promise<void> {
  try {
    await session.waitVisible(sel, t);
  } catch (err) {
    if ((err as Error).name === 'TimeoutError')
      throw new StepFailure(`${sel} ${failed} within ${seconds(shown)}`);
    throw err;
  }
}

/** How long a step's recorded selector may take to match before the step looks for its element. */
export const HEAL_PROBE_MS = 200;

/** Where a step acts: its recorded selector, or the element healing found (heal.ts), saying so. */
interface Located {
  selector: string;
  healed?: HealedStep;
}

/**
 * The element a step acts on. The recorded selector, when it matches an element within HEAL_PROBE_MS (or
 * healing is off, or the browser cannot heal); else the element the recording describes, when one is
 * close enough and clearly ahead (heal.ts); else the recorded selector once more for the rest of the
 * step's time (an element that comes late), failing with the closest candidates and their scores.
 */
async function locate(
  session: BrowserSession,
  step: RunStepItem,
  kind: string,
  selector: string,
  ctx: { timeoutMs: number; heal?: boolean },
): Promise<Located> {
  const { probe, healCandidates, pinSelector } = session;
  if (ctx.heal === false || !probe || !healCandidates || !pinSelector) return { selector };
  const started = Date.now();
  const probeMs = Math.min(HEAL_PROBE_MS, ctx.timeoutMs);
  if (await probe.call(session, selector, probeMs)) return { selector };
  const found = await healCandidates.call(session, step.element?.html ?? '');
  const target = { recorded: found.recorded, cue: instructionCue(step.instruction, kind), kind };
  const verdict = decide(rankCandidates(target, found.candidates), found.candidates);
  if (verdict.chosen) {
    const pinned = await pinSelector.call(
      session,
      verdict.chosen.index,
      selectorProposals(verdict.chosen.features),
    );
    if (pinned) {
      const score = Math.round(verdict.chosen.score * 100) / 100;
      return {
        selector: pinned.selector,
        healed: { from: selector, to: pinned.selector, score, html: pinned.html },
      };
    }
  }
  const rest = ctx.timeoutMs - (Date.now() - started);
  if (rest > 0 && (await probe.call(session, selector, rest))) return { selector };
  // Nothing on the page is like it: a wait-for or assert-visible says what it waited for, as it did
  // before healing existed; every other failure names the closest candidates.
  const waited = kind === 'wait-for' ? 'did not appear' : kind === 'assert-visible' ? 'is not visible' : '';
  if (!verdict.chosen && !verdict.closest.length && waited)
    throw new StepFailure(
      `${selector} ${waited} within ${seconds(ctx.timeoutMs)}; no element of the page is like it`,
    );
  throw new StepFailure(
    verdict.chosen
      ? `${selector} matched nothing; the element it resembles is gone`
      : refusedHeal(selector, verdict.closest),
  );
}

/** What a step did: its output, and where healing moved it (heal.ts). */
export interface StepResult {
  output: string;
  healed?: HealedStep;
}

/**
 * Perform one step: its output on success, beginning `healed: <from> → <to> (<score>)` when its element
 * was found by healing (a StepFailure or the browser's error otherwise). Healing changes where a step
 * acts, never what it checks.
 */
export async function performStep(
  session: BrowserSession,
  step: RunStepItem,
  ctx: {
    variables: Record<string, string>;
    target: Pick<RunTarget, 'url' | 'appUrl' | 'urls' | 'origins'>;
    timeoutMs: number;
    /** `false`: the test opted out of healing. */
    heal?: boolean;
  },
): Promise<StepResult> {
  const kind = normalizeInteraction(step.interaction);
  const started = Date.now();
  let healed: HealedStep | undefined;
  /** The step's element, healed when need be; the time it took is the step's. */
  const where = async (sel: string) => {
    const found = await locate(session, step, kind, sel, ctx);
    healed = found.healed;
    return found.selector;
  };
  const left = () => Math.max(1, ctx.timeoutMs - (Date.now() - started));
  const output = await act(session, step, kind, ctx, where, left);
  if (!healed) return { output };
  return { output: `${healedLine(healed.from, healed.to, healed.score)}; ${output}`, healed };
}

async function act(
  session: BrowserSession,
  step: RunStepItem,
  kind: string,
  ctx: {
    variables: Record<string, string>;
    target: Pick<RunTarget, 'url' | 'appUrl' | 'urls' | 'origins'>;
    timeoutMs: number;
  },
  where: (selector: string) => Promise<string>,
  left: () => number,
): Promise<string> {
  const recorded = step.element?.selector?.trim() || undefined;
  const t = ctx.timeoutMs;
  switch (kind) {
    case 'navigate': {
      const url = navigateTarget(step.url ?? '', ctx.variables, ctx.target);
      await session.goto(url, t);
      return `opened ${url}`;
    }
    case 'click': {
      const sel = await where(requireSelector(step, 'click'));
      await session.click(sel, left());
      return `clicked ${sel}`;
    }
    case 'input-text': {
      const value = inputValue(step.instruction, ctx.variables);
      const sel = await where(requireSelector(step, 'input-text'));
      await session.fill(sel, value, left());
      return `typed ${value.length} character${value.length === 1 ? '' : 's'} into ${sel}`;
    }
    case 'assert-text': {
      const text = quotedText(step.instruction, ctx.variables);
      if (text === undefined || text === '')
        throw new StepFailure('assert-text needs the expected text in its instruction, in double quotes');
      const selector = recorded && (await where(recorded));
      const place = selector ?? 'the page';
      if (!(await session.waitForText(text, selector, left())))
        throw new StepFailure(`text "${text}" not found in ${place} within ${seconds(t)}`);
      return `found "${text}" in ${place}`;
    }
    case 'assert-visible': {
      const sel = await where(requireSelector(step, 'assert-visible'));
      await visibleOrFail(session, sel, left(), 'is not visible', t);
      return `${sel} is visible`;
    }
    case 'wait-for': {
      const sel = await where(requireSelector(step, 'wait-for'));
      await visibleOrFail(session, sel, left(), 'did not appear', t);
      return `${sel} appeared`;
    }
    case 'press': {
      const key = keyOf(step.instruction, ctx.variables);
      const selector = recorded && (await where(recorded));
      await session.press(key, selector, left());
      return `pressed ${key}${selector ? ` on ${selector}` : ''}`;
    }
    default:
      throw new StepFailure(
        `unknown interaction "${step.interaction}": a step is one of ${INTERACTIONS.join(', ')}`,
      );
  }
}
