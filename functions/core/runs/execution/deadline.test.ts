import { describe, expect, test } from '@jest/globals';
import { ENCODE_TIMEOUT_MS } from '../../../ports/browser/port.js';
import {
  CLOSE_RESERVE_MS,
  DOWN_TIMEOUT_MS,
  executorReserveMs,
  runDeadline,
  stepCutShort,
  stepNotStarted,
  stoppedBetweenSteps,
  stoppedDuringStep,
  UPLOAD_TIMEOUT_MS,
} from './deadline.js';

/** A fake Lambda context: `remainingMs` left now. */
const fakeContext = (remainingMs: number) => ({ getRemainingTimeInMillis: () => remainingMs });

describe("the run's deadline", () => {
  test('the reserve is the encode timeout, the upload bound, the close and, with a scenario, the down', () => {
    expect(executorReserveMs({ scenario: false })).toBe(
      ENCODE_TIMEOUT_MS + UPLOAD_TIMEOUT_MS + CLOSE_RESERVE_MS,
    );
    expect(executorReserveMs({ scenario: true })).toBe(
      ENCODE_TIMEOUT_MS + UPLOAD_TIMEOUT_MS + CLOSE_RESERVE_MS + DOWN_TIMEOUT_MS,
    );
    // 375 s and 435 s: in an 890 s Lambda, 455 s or more are left for the steps.
    expect([executorReserveMs({ scenario: false }), executorReserveMs({ scenario: true })]).toEqual([
      375_000, 435_000,
    ]);
  });

  test('a context whose remaining time is short ends the steps before the run timeout would', () => {
    const ctx = fakeContext(executorReserveMs({ scenario: true }) + 30_000);
    const d = runDeadline({
      now: 1_000,
      runMs: 600_000,
      remainingMs: ctx.getRemainingTimeInMillis(),
      scenario: true,
    });
    expect([d.at, d.binding, d.reserveMs]).toEqual([31_000, 'function', 435_000]);
    expect(stoppedBetweenSteps(d, 3, 'click')).toBe(
      "run stopped after step 3: the function's time is nearly up (the executor had 465 s left when the run " +
        "began and keeps 435 s for the video, its upload and the scenario's down)",
    );
    expect(stoppedBetweenSteps(d, 0, 'navigate')).toMatch(/^run stopped before step 1: the function's time/);
    expect(stoppedDuringStep(d, 1, 'click')).toMatch(
      /^run stopped during step 2 \(click\): the function's time/,
    );
    expect(stepNotStarted(d)).toBe("not started: the function's time is nearly up");
    expect(stepCutShort(d)).toBe("the function's time is nearly up");
  });

  test('a long-lived context leaves the run timeout in charge, with its wording', () => {
    const d = runDeadline({
      now: 0,
      runMs: 60_000,
      remainingMs: fakeContext(890_000).getRemainingTimeInMillis(),
      scenario: false,
    });
    expect([d.at, d.binding]).toEqual([60_000, 'run']);
    expect(stoppedBetweenSteps(d, 2, 'click')).toBe(
      'the run timed out after 60 s (its limit) before step 3 (click)',
    );
    expect(stoppedDuringStep(d, 2, 'click')).toBe(
      'the run timed out after 60 s (its limit) during step 3 (click)',
    );
  });

  test('locally (no Lambda context) the run timeout alone applies, with no reserve', () => {
    expect(runDeadline({ now: 5, runMs: 600_000, scenario: true })).toEqual({
      at: 600_005,
      binding: 'run',
      runMs: 600_000,
      reserveMs: 0,
    });
  });

  test('a default run (600 s) in the 890 s executor keeps its whole reserve', () => {
    const d = runDeadline({ now: 0, runMs: 600_000, remainingMs: 890_000, scenario: true });
    expect(890_000 - d.at).toBeGreaterThanOrEqual(executorReserveMs({ scenario: true }));
  });
});
