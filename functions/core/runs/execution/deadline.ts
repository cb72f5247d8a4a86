import { ENCODE_TIMEOUT_MS } from '../../../ports/browser/port.js';

/*
 * How long a run's steps may go on: the run's deadline. After the last step the executor still closes the
 * browser and encodes the video, uploads it, sends the scenario's `down` and writes the outcome; in AWS
 * all of that must fit in what is left of the executor Lambda's time (890 s; the Execute state's
 * TimeoutSeconds 900), or the Lambda is killed mid-way and the run ends `failed` by MarkFailed with its
 * video lost. So the steps stop at the earlier of the run's own limit (counted from before the scenario's
 * `up`) and the Lambda's remaining time less a reserve for what follows them.
 */

/**
 * What a video upload may take: the executor gives up on the put after this (the video is then lost,
 * the run still ends). A 10-minute 1280×720 recording at 10 fps is tens of MB; S3 takes that in seconds
 * from a Lambda, so a minute is a bound with room for retries of a slow part.
 */
export const UPLOAD_TIMEOUT_MS = 60_000;

/**
 * What the scenario's `down` may take: the factory client retries 502/503/504 and connection errors for
 * `retryMs` (30 s) and waits at most `timeoutMs` (30 s) for an answer (core/scenarios/factory.ts,
 * callFactory), so a `down` ends within their sum.
 */
export const DOWN_TIMEOUT_MS = 60_000;

/**
 * Closing the browser (its recording flushed) and the run's last writes (the outcome, the scenario's
 * record): seconds each; 15 s covers a slow DynamoDB retry.
 */
export const CLOSE_RESERVE_MS = 15_000;

/**
 * The reserve kept after the steps: the encoder's own timeout (ports/browser/port.ts: it is killed then),
 * the upload's bound, the `down`'s bound when the run has a scenario, and the close. Sized from those
 * limits rather than from a typical run, so a run that passes is never killed by its Lambda: 375 s
 * without a scenario, 435 s with one. In a Lambda of 890 s that leaves 455 s (515 s) for `up` and the
 * steps, whatever the run's own limit says (docs/cloud-path.md, "Runs under retries and deadlines").
 */
export function executorReserveMs(opts: { scenario: boolean }): number {
  return ENCODE_TIMEOUT_MS + UPLOAD_TIMEOUT_MS + CLOSE_RESERVE_MS + (opts.scenario ? DOWN_TIMEOUT_MS : 0);
}

/** Which limit ends a run's steps, and how the run's error says it. */
export interface RunDeadline {
  /** Epoch ms at which no step may go on. */
  at: number;
  /** `run`: the run's own timeout; `function`: the executor's remaining time less its reserve. */
  binding: 'run' | 'function';
  /** The run's own limit, ms. */
  runMs: number;
  /** The reserve kept after the steps, ms (0 when the executor's time is not known: locally). */
  reserveMs: number;
  /** The executor's remaining time when the run began, ms (undefined locally). */
  remainingMs?: number;
}

/**
 * The deadline of a run that begins now (before its scenario's `up`, which counts inside it): the run's
 * own limit, or earlier when the executor's remaining time (`remainingMs`, the Lambda context's; absent
 * locally, where the run's limit alone applies) less the reserve ends sooner.
 */
export function runDeadline(opts: {
  now: number;
  runMs: number;
  remainingMs?: number;
  scenario: boolean;
}): RunDeadline {
  const byRun = opts.now + opts.runMs;
  if (opts.remainingMs === undefined) return { at: byRun, binding: 'run', runMs: opts.runMs, reserveMs: 0 };
  const reserveMs = executorReserveMs({ scenario: opts.scenario });
  const byFunction = opts.now + opts.remainingMs - reserveMs;
  return {
    at: Math.min(byRun, byFunction),
    binding: byFunction < byRun ? 'function' : 'run',
    runMs: opts.runMs,
    reserveMs,
    remainingMs: opts.remainingMs,
  };
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** Why the executor's time ends a run, in its error. */
export function functionTimeCause(d: RunDeadline): string {
  return (
    `the function's time is nearly up (the executor had ${seconds(d.remainingMs ?? 0)} left when the ` +
    `run began and keeps ${seconds(d.reserveMs)} for the video, its upload and the scenario's down)`
  );
}

/**
 * The run's error when its deadline comes between steps: `done` steps ended (0: before the first page or
 * step). The run's own limit keeps the wording it had (`the run timed out after …`).
 */
export function stoppedBetweenSteps(d: RunDeadline, done: number, nextInteraction: string): string {
  if (d.binding === 'run')
    return `the run timed out after ${seconds(d.runMs)} (its limit) before step ${done + 1} (${nextInteraction})`;
  return done === 0
    ? `run stopped before step 1: ${functionTimeCause(d)}`
    : `run stopped after step ${done}: ${functionTimeCause(d)}`;
}

/** The run's error when its deadline cuts step `index` (0-based) short. */
export function stoppedDuringStep(d: RunDeadline, index: number, interaction: string): string {
  if (d.binding === 'run')
    return `the run timed out after ${seconds(d.runMs)} (its limit) during step ${index + 1} (${interaction})`;
  return `run stopped during step ${index + 1} (${interaction}): ${functionTimeCause(d)}`;
}

/** What a step cut short by the deadline records in its output (after its own). */
export function stepCutShort(d: RunDeadline): string {
  return d.binding === 'run'
    ? `the run reached its time limit, ${seconds(d.runMs)}`
    : "the function's time is nearly up";
}

/** What a step that never started records. */
export function stepNotStarted(d: RunDeadline): string {
  return d.binding === 'run'
    ? `not started: the run timed out after ${seconds(d.runMs)}`
    : "not started: the function's time is nearly up";
}
