import {
  type BrowserSession,
  MAX_STEP_EVENTS,
  type PageEvent,
  type Recording,
} from '../../../ports/browser/port.js';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import type { RunAccessCookie } from '../../applications/index.js';
import {
  callFactory,
  claimDown,
  downPayload,
  type ScenarioState,
  saveScenarioState,
  type UpAnswer,
} from '../../scenarios/index.js';
import { RunNotOwned, saveRunStep } from '../lifecycle.js';
import { type HealedStep, mediaKeys, type RunItem, type RunStepItem, type RunTarget } from '../store.js';
import {
  functionTimeCause,
  type RunDeadline,
  stepCutShort,
  stepNotStarted,
  stoppedBetweenSteps,
  stoppedDuringStep,
  UPLOAD_TIMEOUT_MS,
} from './deadline.js';
import { attemptMediaKey, type StepEvents, stepEvents } from './media.js';
import { previewCookies, provision } from './provision.js';
import { browserError, performStep, StepFailure, targetOrigins, VIEWPORT } from './steps.js';
import type { ExecuteDeps } from './types.js';

/*
 * One attempt of a run (a test may be retried): its scenario `up`, a browser session (a fresh
 * context: a video and a trace of its own), the first page, the steps, the media, and `down`. The
 * executor (executor.ts) runs attempts until one passes or the retries are spent.
 */

/** What an attempt needs from its run's execution. */
export interface AttemptInput {
  deps: ExecuteDeps;
  run: RunItem;
  /** The execution's claim on the run (runs.ts `attempt`): every write is conditioned on it. */
  owner: string;
  target: RunTarget;
  /** 1 for the first attempt, 2 for its first retry… */
  number: number;
  limit: RunDeadline;
  runMs: number;
  stepMs: number;
  invocation: string;
  now: () => number;
  /** Values masked in outputs, URLs, events and the trace (scenario `up` adds the factory's secret). */
  masked: string[];
  /** A protected preview's access cookies, each for its own app origin only (core/access.ts). */
  access?: RunAccessCookie[];
}

/** A step as this attempt recorded it: its outcome, and what the page reported during it. */
export type StepRecord = RunStepItem & Partial<StepEvents>;

/** What an attempt did. */
export interface AttemptOutcome {
  number: number;
  status: 'passed' | 'failed';
  steps: StepRecord[];
  error?: string;
  videoKey?: string;
  traceKey?: string;
  /** The origins the browser refused to the page without failing a step (masked, sorted, at most 20). */
  refusedOrigins?: string[];
  startedAt: string;
  endedAt: string;
}

/** How many refused origins a run records (each step's network lines name its own). */
export const MAX_REFUSED_ORIGINS = 20;

/** Reject with a StepFailure when `work` takes longer than `ms` (a step's or the run's limit). */
export async function within<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
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

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** Internal: the first page is not opened when the scenario's auth could not be applied. */
class SkipFirstPage extends Error {}

/**
 * Run one attempt. Steps: the scenario's `up` (fresh tokens per attempt); open a browser session
 * (video and trace); apply the scenario's auth; open the first page; perform each step within its
 * timeout and the run's deadline, recording its output, URL, screenshot, and the page's console and
 * network events (all masked), saving it as it ends; after a failure the rest are `skipped`; close the
 * session and store its video and trace (masked); send `down`. Throws RunNotOwned when the run was ended
 * by someone else meanwhile (after closing the browser and sending `down`).
 */
export async function runAttempt(a: AttemptInput): Promise<AttemptOutcome> {
  const { deps, run, target, now } = a;
  const startedAt = new Date(now()).toISOString();
  const mask = (text: string) => maskWith(text, a.masked);
  const steps: StepRecord[] = run.steps.map((s) => ({
    ...s,
    status: 'pending',
    output: '',
  }));
  const skipRest = (from: number) => {
    for (let i = from; i < steps.length; i++) steps[i] = { ...steps[i]!, status: 'skipped', output: '' };
  };
  // The page's requests the browser refused (run confinement) that were not its own navigation: each on
  // its step's network lines (those before the first step with the first step), their origins on the run.
  const refusedOrigins = new Set<string>();
  let refusedLines: PageEvent[] = [];
  const outcome = (error?: string, media: { videoKey?: string; traceKey?: string } = {}): AttemptOutcome => ({
    number: a.number,
    status: error === undefined ? 'passed' : 'failed',
    steps,
    ...(error !== undefined ? { error } : {}),
    ...media,
    ...(refusedOrigins.size
      ? { refusedOrigins: [...refusedOrigins].sort().slice(0, MAX_REFUSED_ORIGINS) }
      : {}),
    startedAt,
    endedAt: new Date(now()).toISOString(),
  });

  // Scenario data: `up` before the browser opens; `down` once the steps ended.
  let scenario:
    | { state: ScenarioState; url: string; secret: string; up: UpAnswer; headers: Record<string, string> }
    | undefined;
  if (run.scenario) {
    const provisioned = await provision(deps, run, target, a.masked, mask, a.number, a.access);
    if ('error' in provisioned) {
      skipRest(0);
      return outcome(provisioned.error);
    }
    scenario = provisioned;
  }
  const down = async () => {
    if (scenario?.state.status !== 'up') return;
    const { state } = scenario;
    // One `down` whoever races: a restart's recovery, MarkFailed or the sweep may have claimed it already.
    const mine = await claimDown(run.runId, `executor ${a.invocation}`).catch((err) => {
      log.warn('could not claim a scenario down', { runId: run.runId, error: (err as Error).name });
      return false;
    });
    if (!mine) return;
    const started = now();
    try {
      // Locally the factory is called at its own port, past the front door: a preview that fell asleep
      // during a quiet run is woken first (`wake` is absent in AWS, where the request wakes it).
      if (target.envKey) await deps.wake?.({ orgId: run.orgId, envKey: target.envKey });
      await callFactory(scenario.url, scenario.secret, downPayload(state), mask, {
        ...deps.factory,
        headers: scenario.headers,
      });
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

  const deadline = a.limit.at;
  const { limit, stepMs, runMs } = a;
  let session: BrowserSession;
  try {
    session = await deps.browser.open({
      viewport: VIEWPORT,
      video: true,
      trace: true,
      allowedOrigins: targetOrigins(target),
    });
  } catch (err) {
    skipRest(0);
    await down();
    return outcome(mask(`the browser could not start: ${browserError(err)}`));
  }

  let error: string | undefined;
  let firstMs = stepMs;
  // What the page reported while the first page loaded: shown with the first step.
  let pending: PageEvent[] = [];
  let pendingDropped = 0;
  const events = () => {
    const taken = session.takeEvents?.() ?? { events: [], dropped: 0 };
    const refused = refusedLines.slice(0, MAX_STEP_EVENTS);
    const all = [...refused, ...pending, ...taken.events];
    const dropped = pendingDropped + taken.dropped + refusedLines.length - refused.length;
    pending = [];
    pendingDropped = 0;
    refusedLines = [];
    return stepEvents(all, dropped, mask);
  };
  /**
   * What the browser refused since the last call: the page's own navigation refused (returned: it fails
   * the step), the page's other requests refused (kept for the step's network lines and the run).
   */
  const refusedNavigation = (): string | undefined => {
    const { navigation, requests, dropped } = session.takeRefusals();
    for (const r of requests) {
      refusedOrigins.add(mask(r.origin));
      const text = r.count > 1 ? `${r.message} (${r.count} times)` : r.message;
      if (!refusedLines.some((l) => l.text === text))
        refusedLines.push({ kind: 'request', level: 'refused', text });
    }
    if (dropped)
      refusedLines.push({ kind: 'request', level: 'refused', text: `${dropped} more requests refused` });
    return navigation;
  };
  try {
    const auth = scenario?.up.auth;
    try {
      for (const { url, cookie } of a.access ?? []) await session.addCookies?.([cookie], url);
      if (auth?.headers && Object.keys(auth.headers).length) {
        if (!session.setExtraHTTPHeaders) throw new Error('this browser cannot set request headers');
        await session.setExtraHTTPHeaders(auth.headers);
      }
      if (auth?.cookies?.length) {
        if (!session.addCookies) throw new Error('this browser cannot set cookies');
        await session.addCookies(previewCookies(auth.cookies, target), target.appUrl);
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
      await session.beginStep?.('open the first page');
      firstMs = Math.min(stepMs, deadline - now());
      await within(
        session.goto(target.url, firstMs),
        firstMs + 2_000,
        `the first page did not load within ${seconds(stepMs)}`,
      );
      const refused = refusedNavigation();
      if (refused) throw new StepFailure(refused);
    } catch (err) {
      if (err instanceof SkipFirstPage) throw err;
      const crash = session.crashed();
      const refused = refusedNavigation();
      // The run's limit, not the step's, cut the first page short (`up` or the browser's start used it).
      const runOut = !refused && firstMs < stepMs && now() >= deadline - 100;
      error = crash
        ? `the browser died while opening the first page: ${crash}`
        : runOut
          ? stoppedBetweenSteps(limit, 0, steps[0]?.interaction ?? 'navigate')
          : mask(`could not open the first page ${target.url}: ${refused ?? browserError(err)}`);
      skipRest(0);
    }
    const first = session.takeEvents?.();
    if (first) {
      pending = first.events;
      pendingDropped = first.dropped;
    }
    for (let i = 0; i < steps.length && error === undefined; i++) {
      const step = steps[i]!;
      const remaining = deadline - now();
      const timeoutMs = Math.min(stepMs, remaining);
      let output: string;
      let healed: HealedStep | undefined;
      let passed = false;
      if (remaining <= 0) {
        output = stepNotStarted(limit);
        error = stoppedBetweenSteps(limit, i, step.interaction);
      } else {
        try {
          await session.beginStep?.(`step ${i + 1}: ${step.interaction}${stepLabel(step)}`);
          ({ output, healed } = await within(
            performStep(session, step, {
              variables: run.variables,
              target,
              timeoutMs,
              ...(run.heal === false ? { heal: false } : {}),
            }),
            timeoutMs + 2_000,
            timeoutMs < stepMs
              ? limit.binding === 'run'
                ? `the run timed out after ${seconds(runMs)} (its limit)`
                : `the step was stopped: ${functionTimeCause(limit)}`
              : `the step timed out after ${seconds(timeoutMs)}`,
          ));
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
      const done: StepRecord = { ...step, status: passed ? 'passed' : 'failed', output: mask(output) };
      if (healed) done.healed = maskHealed(healed, mask);
      if (!crash) {
        try {
          done.url = mask(session.url());
          const png = await within(session.screenshot(5_000), 7_000, 'the screenshot timed out');
          const key = attemptMediaKey(mediaKeys.step(run, i, step.id), a.number);
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
      // The browser refused the page's own navigation during the step or until its screenshot (a link,
      // a redirect, a script's `location`): the step fails with that, whatever it did, and says nothing
      // of the target but its origin (nor shows it: it never loaded). The page's other requests refused
      // (an image, a font, a fetch, a WebSocket, a frame, a popup) are on its network lines: it goes on.
      const refused = refusedNavigation();
      Object.assign(done, events());
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
      await saveRunStep(run.runId, a.owner, i, done);
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
  const media = await storeRecording(a, session, mask);
  await down();
  return outcome(error, media);
}

/** A heal as stored: the selectors and the element's HTML masked like every output. */
function maskHealed(h: HealedStep, mask: (text: string) => string): HealedStep {
  return { from: mask(h.from), to: mask(h.to), score: h.score, ...(h.html ? { html: mask(h.html) } : {}) };
}

/** ` #go` or ` "Welcome"`: what a step acts on, for its title in the trace. */
function stepLabel(step: RunStepItem): string {
  const selector = step.element?.selector?.trim();
  return selector ? ` ${selector}` : '';
}

/** Close the session and store its video and trace (each upload bounded: core/runs/execution/deadline.ts). */
async function storeRecording(
  a: AttemptInput,
  session: BrowserSession,
  mask: (text: string) => string,
): Promise<{ videoKey?: string; traceKey?: string }> {
  const { run, deps } = a;
  let recording: Recording;
  try {
    recording = await session.close({ mask });
  } catch (err) {
    log.warn('no video or trace of a run', { runId: run.runId, error: browserError(err) });
    return {};
  }
  for (const problem of recording.problems ?? [])
    log.warn('a run recording is missing', { runId: run.runId, problem: mask(problem) });
  const stored: { videoKey?: string; traceKey?: string } = {};
  const upload = async (key: string, body: Buffer, contentType: string, what: string) => {
    try {
      await within(
        deps.media.put(key, body, contentType),
        UPLOAD_TIMEOUT_MS,
        `the ${what} upload took over ${seconds(UPLOAD_TIMEOUT_MS)}`,
      );
      return true;
    } catch (err) {
      log.warn(`no ${what} of a run`, { runId: run.runId, error: browserError(err) });
      return false;
    }
  };
  const { video, trace } = recording;
  await Promise.all([
    video &&
      (async () => {
        const key = attemptMediaKey(mediaKeys.video(run, video.extension), a.number);
        if (await upload(key, video.body, video.contentType, 'video')) stored.videoKey = key;
      })(),
    trace &&
      (async () => {
        const key = attemptMediaKey(mediaKeys.trace(run), a.number);
        if (await upload(key, trace, 'application/zip', 'trace')) stored.traceKey = key;
      })(),
  ]);
  return stored;
}

/** `maskSecrets` over the list as it is now (it grows when `up` adds the factory's secret). */
const maskWith = (text: string, values: string[]) => maskSecrets(text, values);
