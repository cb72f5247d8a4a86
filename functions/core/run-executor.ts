import type { Browser, BrowserSession } from '../ports/browser/port.js';
import type { MediaWriter } from '../ports/media/port.js';
import type { SecretStore } from '../ports/secret-store/port.js';
import { newId } from '../shared/crypto.js';
import { log } from '../shared/log.js';
import { maskSecrets } from '../shared/mask.js';
import { navigationRefused, originAllowed, runOrigins } from '../shared/origins.js';
import { prepareRunAccess, type RunAccessCookie } from './access.js';
import { awaitOtherExecutor, claimExecutor } from './run-claims.js';
import {
  executorReserveMs,
  functionTimeCause,
  runDeadline,
  stepCutShort,
  stepNotStarted,
  stoppedBetweenSteps,
  stoppedDuringStep,
  UPLOAD_TIMEOUT_MS,
} from './run-deadline.js';
import { finishRun, RunNotOwned, saveRunStep } from './run-lifecycle.js';
import { loadRun, mediaKeys, type RunItem, type RunStepItem, type RunTarget } from './run-store.js';
import {
  callFactory,
  claimDown,
  downPayload,
  type FactoryClientOptions,
  factorySecret,
  factoryUrl,
  loadScenarioRecipe,
  noFactorySecret,
  parseUpAnswer,
  type ScenarioState,
  saveScenarioState,
  substituteTokens,
  testRunShortId,
  type UpAnswer,
  upPayload,
} from './scenarios.js';

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
 * The origins a run's browser may load (issue 23): its environment's app URLs and its application's
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
      try {
        await session.waitVisible(sel, t);
      } catch (err) {
        if ((err as Error).name === 'TimeoutError')
          throw new StepFailure(`${sel} is not visible within ${seconds(t)}`);
        throw err;
      }
      return `${sel} is visible`;
    }
    case 'wait-for': {
      const sel = requireSelector(step, 'wait-for');
      try {
        await session.waitVisible(sel, t);
      } catch (err) {
        if ((err as Error).name === 'TimeoutError')
          throw new StepFailure(`${sel} did not appear within ${seconds(t)}`);
        throw err;
      }
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

/** Reject with a StepFailure when `work` takes longer than `ms` (a step's or the run's limit). */
async function within<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StepFailure(message)), ms);
  });
  try {
    return await Promise.race([work, limit]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ExecuteDeps {
  browser: Browser;
  media: MediaWriter;
  secrets: SecretStore;
  /** Defaults when the test sets none (config: 15 s and 600 s unless changed). */
  stepTimeoutSeconds: number;
  runTimeoutSeconds: number;
  now?: () => number;
  /** Retry and timeout limits of Environment Factory requests (30 s each unless changed: tests). */
  factory?: FactoryClientOptions;
  /**
   * The executor Lambda's remaining time (its context's getRemainingTimeInMillis): the steps stop early
   * enough to leave the reserve for the video, its upload and `down` (core/run-deadline.ts). Absent
   * locally, where the run's own limit alone applies.
   */
  remainingMs?: () => number;
  /** This invocation's id (the Lambda request id): its claim on the run's attempt (core/run-claims.ts). */
  invocationId?: string;
  /** How often a retried executor looks whether the first one ended the run (2 s unless changed: tests). */
  claimPollMs?: number;
  /** Wake the run's environment if it sleeps (issue 29; local: the runtime's `wake`; AWS: absent). */
  wake?: (ref: { orgId: string; envKey: string }) => Promise<void>;
}

export interface ExecuteInput {
  runId: string;
  attempt: string;
  target: RunTarget;
}

/**
 * The values to mask in outputs: the run's variables and every secret of the environment's apps. Fails
 * closed: a bundle that cannot be read means outputs that cannot be masked, so the run does not start
 * (the cause names the app and the error's name, never a value).
 */
async function secretValues(
  deps: ExecuteDeps,
  run: RunItem,
  target: RunTarget,
): Promise<{ values: string[] } | { error: string }> {
  const values = Object.values(run.variables ?? {});
  for (const app of target.apps) {
    try {
      const bundle = await deps.secrets.read({ applicationId: target.applicationId, app });
      values.push(...Object.values(bundle ?? {}));
    } catch (err) {
      log.warn('could not read a secret bundle to mask run outputs', { app, error: (err as Error).name });
      return {
        error:
          `the secret bundle of app ${app} could not be read (${(err as Error).name}), so the run's output ` +
          'could not be masked: the run did not start; run it again',
      };
    }
  }
  return { values };
}

/**
 * Execute a prepared run (the `Execute` state of `testRun`).
 * Steps: load the run (a run no longer `running` under this attempt was ended meanwhile: RunNotOwned);
 * a host without a browser or ffmpeg ends it `failed` saying what to install; open a browser session
 * (recording a video) and the first page; perform each step within its timeout (the test's, else the
 * default 15 s) and the run's (the test's, else 10 min), recording its output (secrets and variable
 * values masked), the page's URL and a screenshot, and saving it as it ends; after a failure the rest
 * are `skipped`; a browser that dies fails the run with that cause; store the video; end the run
 * `passed` when every step passed, else `failed` with the first failure as its error.
 */
export async function executeRun(deps: ExecuteDeps, input: ExecuteInput): Promise<'passed' | 'failed'> {
  const work = execute(deps, input);
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  executing.add(settled);
  void settled.then(() => executing.delete(settled));
  return work;
}

/** Executions in progress in this process (the local server waits for them when it stops). */
const executing = new Set<Promise<void>>();

/**
 * Resolves once every execution in progress in this process has written its outcome (or after
 * `timeoutMs`). The local server closes the browsers first, so each ends promptly, failed with the reason.
 */
export async function executionsSettled(timeoutMs = 30_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([...executing]),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

async function execute(deps: ExecuteDeps, input: ExecuteInput): Promise<'passed' | 'failed'> {
  const now = deps.now ?? Date.now;
  const run = await loadRun(input.runId);
  if (run?.status !== 'running' || run.attempt !== input.attempt)
    throw new RunNotOwned(`run ${input.runId} is no longer run by attempt ${input.attempt}`);
  // The run's clock starts now: the scenario's `up` counts inside its limit.
  const runMs = (run.runTimeoutSeconds ?? deps.runTimeoutSeconds) * 1000;
  const limit = runDeadline({
    now: now(),
    runMs,
    remainingMs: deps.remainingMs?.(),
    scenario: run.scenario !== undefined,
  });
  const deadline = limit.at;
  // A retry of Execute (Step Functions) finds the first invocation's claim: it never runs the steps again.
  const invocation = deps.invocationId ?? newId();
  const claim = await claimExecutor(
    run.runId,
    input.attempt,
    invocation,
    now() + (limit.remainingMs ?? runMs + executorReserveMs({ scenario: true })),
  );
  if (!claim.claimed)
    return awaitOtherExecutor(
      { secrets: deps.secrets, now, ...(deps.claimPollMs ? { pollMs: deps.claimPollMs } : {}) },
      {
        runId: run.runId,
        attempt: input.attempt,
        leaseUntil: claim.leaseUntil,
        until: now() + (limit.remainingMs ?? runMs + executorReserveMs({ scenario: true })) - 5_000,
      },
    );
  const steps: RunStepItem[] = run.steps.map((s) => ({ ...s }));
  const skipRest = (from: number) => {
    for (let i = from; i < steps.length; i++) steps[i] = { ...steps[i]!, status: 'skipped', output: '' };
  };
  const end = async (status: 'passed' | 'failed', error?: string, videoKey?: string) => {
    await finishRun(run, input.attempt, { status, steps, error, videoKey });
    return status;
  };

  const missing = deps.browser.missing();
  if (missing) {
    skipRest(0);
    return end('failed', missing);
  }
  const secrets = await secretValues(deps, run, input.target);
  if ('error' in secrets) {
    skipRest(0);
    return end('failed', secrets.error);
  }
  const masked = secrets.values;
  const mask = (text: string) => maskSecrets(text, masked);
  // Issue 29: a sleeping preview is woken first; a protected one's access cookie, for its own origins only.
  let access: RunAccessCookie[];
  try {
    access = await prepareRunAccess(deps, run.orgId, input.target);
  } catch (err) {
    skipRest(0);
    return end('failed', mask(`the preview could not be woken: ${(err as Error).message}`));
  }

  // Scenario data (issue 12): `up` before the browser opens; `down` once the steps ended.
  let scenario: { state: ScenarioState; url: string; secret: string; up: UpAnswer } | undefined;
  if (run.scenario) {
    const provisioned = await provision(deps, run, input.target, masked, mask);
    if ('error' in provisioned) {
      skipRest(0);
      return end('failed', provisioned.error);
    }
    scenario = provisioned;
  }
  const down = async () => {
    if (scenario?.state.status !== 'up') return;
    const { state } = scenario;
    // One sender (issue 24): a restart's recovery, MarkFailed or the sweep may have claimed it already.
    const mine = await claimDown(run.runId, `executor ${invocation}`).catch((err) => {
      log.warn('could not claim a scenario down', { runId: run.runId, error: (err as Error).name });
      return false;
    });
    if (!mine) return;
    const started = now();
    try {
      await callFactory(scenario.url, scenario.secret, downPayload(state), mask, deps.factory);
      state.status = 'down';
    } catch (err) {
      state.status = 'down_failed';
      state.downError = mask((err as Error).message).slice(0, 1000);
      log.warn('scenario down failed', { runId: run.runId, error: state.downError });
    }
    state.downMs = now() - started;
    await saveScenarioState(run.runId, state).catch((err) =>
      log.error('could not record a scenario down', { runId: run.runId, error: (err as Error).message }),
    );
  };

  const stepMs = (run.stepTimeoutSeconds ?? deps.stepTimeoutSeconds) * 1000;

  let session: BrowserSession;
  try {
    session = await deps.browser.open({
      viewport: VIEWPORT,
      video: true,
      allowedOrigins: targetOrigins(input.target),
    });
  } catch (err) {
    skipRest(0);
    await down();
    return end('failed', mask(`the browser could not start: ${browserError(err)}`));
  }

  let error: string | undefined;
  let videoKey: string | undefined;
  try {
    const auth = scenario?.up.auth;
    try {
      for (const { url, cookie } of access) await session.addCookies?.([cookie], url);
      if (auth?.headers && Object.keys(auth.headers).length) {
        if (!session.setExtraHTTPHeaders) throw new Error('this browser cannot set request headers');
        await session.setExtraHTTPHeaders(auth.headers);
      }
      if (auth?.cookies?.length) {
        if (!session.addCookies) throw new Error('this browser cannot set cookies');
        await session.addCookies(previewCookies(auth.cookies, input.target), input.target.appUrl);
      }
    } catch (err) {
      error = mask(`the scenario's auth could not be applied to the browser: ${browserError(err)}`);
      skipRest(0);
    }
    try {
      if (error !== undefined) throw new SkipFirstPage();
      if (deadline - now() <= 0) {
        // `up` (or a short-lived executor) used the time: the run stops before its first page.
        error = stoppedBetweenSteps(limit, 0, steps[0]?.interaction ?? 'navigate');
        skipRest(0);
        throw new SkipFirstPage();
      }
      await within(
        session.goto(input.target.url, Math.min(stepMs, deadline - now())),
        Math.min(stepMs, deadline - now()) + 2_000,
        `the first page did not load within ${seconds(stepMs)}`,
      );
      const refused = session.takeRefusal();
      if (refused) throw new StepFailure(refused);
    } catch (err) {
      if (err instanceof SkipFirstPage) throw err;
      const crash = session.crashed();
      const refused = session.takeRefusal();
      error = crash
        ? `the browser died while opening the first page: ${crash}`
        : mask(`could not open the first page ${input.target.url}: ${refused ?? browserError(err)}`);
      skipRest(0);
    }
    for (let i = 0; i < steps.length && error === undefined; i++) {
      const step = steps[i]!;
      const remaining = deadline - now();
      const timeoutMs = Math.min(stepMs, remaining);
      let output: string;
      let passed = false;
      if (remaining <= 0) {
        output = stepNotStarted(limit);
        error = stoppedBetweenSteps(limit, i, step.interaction);
      } else {
        try {
          output = await within(
            performStep(session, step, { variables: run.variables, target: input.target, timeoutMs }),
            timeoutMs + 2_000,
            timeoutMs < stepMs
              ? limit.binding === 'run'
                ? `the run timed out after ${seconds(runMs)} (its limit)`
                : `the step was stopped: ${functionTimeCause(limit)}`
              : `the step timed out after ${seconds(timeoutMs)}`,
          );
          passed = true;
        } catch (err) {
          output = browserError(err);
        }
      }
      // The run's limit, not the step's, cut this step short.
      const runOut = !passed && remaining > 0 && timeoutMs < stepMs && now() >= deadline - 100;
      if (runOut) output = `${output} (${stepCutShort(limit)})`;
      const crash = session.crashed();
      if (crash) {
        passed = false;
        output = `${output} (the browser died: ${crash})`;
      }
      const done: RunStepItem = { ...step, status: passed ? 'passed' : 'failed', output: mask(output) };
      if (!crash) {
        try {
          done.url = mask(session.url());
          const png = await within(session.screenshot(5_000), 7_000, 'the screenshot timed out');
          const key = mediaKeys.step(run, i, step.id);
          await deps.media.put(key, png, 'image/png');
          done.imageKey = key;
        } catch (err) {
          log.warn('no screenshot of a run step', {
            runId: run.runId,
            step: i + 1,
            error: browserError(err),
          });
        }
      }
      // The browser refused a load during the step or until its screenshot (a redirect, a frame, a popup,
      // the page's own request, which may come after the page loaded): the step fails with that, whatever
      // it did, and says nothing of the target but its origin (nor shows it: it never loaded).
      const refused = session.takeRefusal();
      if (refused) {
        passed = false;
        output = refused;
        done.status = 'failed';
        done.output = mask(refused);
      }
      steps[i] = done;
      if (!passed) {
        error ??= crash
          ? `the browser died during step ${i + 1} (${step.interaction}): ${crash}`
          : runOut
            ? stoppedDuringStep(limit, i, step.interaction)
            : mask(`step ${i + 1} (${step.interaction}) failed: ${output}`);
        skipRest(i + 1);
      }
      await saveRunStep(run.runId, input.attempt, i, done);
    }
  } catch (err) {
    if (err instanceof RunNotOwned) {
      await session.close().catch(() => undefined);
      await down();
      throw err;
    }
    if (err instanceof SkipFirstPage && error !== undefined) {
      // the auth could not be applied: nothing ran
    } else error ??= mask(`the run stopped: ${browserError(err)}`);
  }
  try {
    const video = await session.close();
    if (video) {
      const key = mediaKeys.video(run, video.extension);
      // Bounded, as the executor's reserve counts on (core/run-deadline.ts).
      await within(
        deps.media.put(key, video.body, video.contentType),
        UPLOAD_TIMEOUT_MS,
        `the video upload took over ${seconds(UPLOAD_TIMEOUT_MS)}`,
      );
      videoKey = key;
    }
  } catch (err) {
    log.warn('no video of a run', { runId: run.runId, error: browserError(err) });
  }
  await down();
  return end(error === undefined ? 'passed' : 'failed', error, videoKey);
}

/**
 * The cookies of a scenario's `up` answer, each for a host of the run's preview: one without a domain is
 * the app's; one whose domain (a leading dot ignored) is not exactly a host of one of the environment's
 * app URLs would reach something else (a parent domain holds other previews), so the auth is refused.
 */
export function previewCookies<C extends { name: string; domain?: string }>(
  cookies: C[],
  target: Pick<RunTarget, 'appUrl' | 'urls'>,
): C[] {
  const hosts = new Set(
    [target.appUrl, ...Object.values(target.urls ?? {})].map((u) => new URL(u).hostname.toLowerCase()),
  );
  for (const c of cookies) {
    if (c.domain === undefined) continue;
    const domain = c.domain.replace(/^\./, '').toLowerCase();
    if (!hosts.has(domain))
      throw new Error(
        `the factory's cookie "${c.name}" is for ${domain}, not a host of this run's preview ` +
          `(${[...hosts].sort().join(', ')})`,
      );
  }
  return cookies;
}

/** Internal: the first page is not opened when the scenario's auth could not be applied. */
class SkipFirstPage extends Error {}

/**
 * Provision a run's scenario (issue 12): the factory (preview.yaml `factory`, else the application's
 * setting) must be configured and an app of the environment; load the recipe; send the signed `up` with
 * the recipe's graph, tokens substituted; record it on the run. An error names what failed (masked).
 */
async function provision(
  deps: ExecuteDeps,
  run: RunItem,
  target: RunTarget,
  masked: string[],
  mask: (text: string) => string,
): Promise<{ state: ScenarioState; url: string; secret: string; up: UpAnswer } | { error: string }> {
  const ref = run.scenario!;
  const label = `scenario "${ref.recipe}" (setup ${ref.setupId})`;
  const testRunId = run.runId;
  const state: ScenarioState = {
    setupId: ref.setupId,
    name: ref.recipe,
    ...(ref.version !== undefined ? { version: ref.version } : {}),
    testRunId,
    testRunShortId: testRunShortId(testRunId),
    status: 'provisioning',
  };
  const fail = async (message: string) => {
    state.status = 'up_failed';
    state.error = mask(message).slice(0, 2000);
    await saveScenarioState(run.runId, state);
    return { error: mask(`${label} could not be provisioned: ${message}`) };
  };
  if (!target.factory)
    return fail(
      `no Environment Factory is configured for application ${target.applicationId}: set ` +
        '`factory: {app, path}` in preview.yaml, or `previewctl apps update --factory-app APP --factory-path PATH`',
    );
  const url = factoryUrl(target.urls ?? {}, target.factory);
  if (typeof url !== 'string') return fail(url.error);
  state.factoryUrl = url;
  const loaded = await loadScenarioRecipe(run.orgId, ref);
  if ('error' in loaded) return fail(loaded.error);
  state.version = loaded.recipe.version;
  const secret = await factorySecret(deps.secrets, target.applicationId);
  if (!secret) return fail(noFactorySecret(target.applicationId));
  masked.push(secret);
  await saveScenarioState(run.runId, state);
  const started = Date.now();
  try {
    const create = substituteTokens(loaded.recipe.create, {
      testRunId,
      testRunShortId: state.testRunShortId,
    });
    const answer = parseUpAnswer(
      await callFactory(url, secret, upPayload(state, create), mask, deps.factory),
    );
    state.upMs = Date.now() - started;
    state.status = 'up';
    if (answer.refs !== undefined) state.refs = answer.refs;
    await saveScenarioState(run.runId, state);
    return { state, url, secret, up: answer };
  } catch (err) {
    state.upMs = Date.now() - started;
    return fail((err as Error).message);
  }
}
