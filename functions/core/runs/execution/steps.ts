import type { BrowserSession } from '../../../ports/browser/port.js';
import { navigationRefused, originAllowed, runOrigins } from '../../../shared/origins.js';
import type { RunStepItem, RunTarget } from '../store.js';

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
async function visibleOrFail(session: BrowserSession, sel: string, t: number, failed: string): Promise<void> {
  try {
    await session.waitVisible(sel, t);
  } catch (err) {
    if ((err as Error).name === 'TimeoutError')
      throw new StepFailure(`${sel} ${failed} within ${seconds(t)}`);
    throw err;
  }
}

/** Perform one step; its output on success (a StepFailure or the browser's error otherwise). */
export async function performStep(
  session: BrowserSession,
  step: RunStepItem,
  ctx: {
    variables: Record<string, string>;
    target: Pick<RunTarget, 'url' | 'appUrl' | 'urls' | 'origins'>;
    timeoutMs: number;
  },
): Promise<string> {
  const kind = normalizeInteraction(step.interaction);
  const selector = step.element?.selector?.trim() || undefined;
  const t = ctx.timeoutMs;
  switch (kind) {
    case 'navigate': {
      const url = navigateTarget(step.url ?? '', ctx.variables, ctx.target);
      await session.goto(url, t);
      return `opened ${url}`;
    }
    case 'click': {
      const sel = requireSelector(step, 'click');
      await session.click(sel, t);
      return `clicked ${sel}`;
    }
    case 'input-text': {
      const sel = requireSelector(step, 'input-text');
      const value = inputValue(step.instruction, ctx.variables);
      await session.fill(sel, value, t);
      return `typed ${value.length} character${value.length === 1 ? '' : 's'} into ${sel}`;
    }
    case 'assert-text': {
      const text = quotedText(step.instruction, ctx.variables);
      if (text === undefined || text === '')
        throw new StepFailure('assert-text needs the expected text in its instruction, in double quotes');
      const where = selector ?? 'the page';
      if (!(await session.waitForText(text, selector, t)))
        throw new StepFailure(`text "${text}" not found in ${where} within ${seconds(t)}`);
      return `found "${text}" in ${where}`;
    }
    case 'assert-visible': {
      const sel = requireSelector(step, 'assert-visible');
      await visibleOrFail(session, sel, t, 'is not visible');
      return `${sel} is visible`;
    }
    case 'wait-for': {
      const sel = requireSelector(step, 'wait-for');
      await visibleOrFail(session, sel, t, 'did not appear');
      return `${sel} appeared`;
    }
    case 'press': {
      const key = keyOf(step.instruction, ctx.variables);
      await session.press(key, selector, t);
      return `pressed ${key}${selector ? ` on ${selector}` : ''}`;
    }
    default:
      throw new StepFailure(
        `unknown interaction "${step.interaction}": a step is one of ${INTERACTIONS.join(', ')}`,
      );
  }
}
