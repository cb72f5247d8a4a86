import type { PageEvent } from '../../../ports/browser/port.js';

/*
 * What a run attempt records besides its steps' outcomes: each attempt's media under its own
 * keys, and what the page reported during each step.
 */

/**
 * The key of an attempt's media: the first attempt's are the run's own keys (`runs/<org>/<run>/video.mp4`),
 * a retry's sit in a folder of their own (`runs/<org>/<run>/attempt-2/video.mp4`).
 */
export function attemptMediaKey(key: string, attempt: number): string {
  if (attempt <= 1) return key;
  const slash = key.lastIndexOf('/');
  return `${key.slice(0, slash + 1)}attempt-${attempt}/${key.slice(slash + 1)}`;
}

/**
 * A step's console and network events as stored on the step and shown in its metadata: console errors
 * and warnings and uncaught page errors (`level`: `error`, `warning`, `page-error`), failed or 4xx/5xx
 * requests (`status`: `failed` or the code), and the page's requests the run's confinement refused
 * (`status`: `refused`: attempt.ts); `dropped` counts those past the bound (MAX_STEP_EVENTS).
 */
export interface StepEvents {
  console: { level: string; text: string }[];
  network: { status: string; text: string }[];
  eventsDropped: number;
}

/** A step's events, masked, each kind only when there is one. */
export function stepEvents(
  events: PageEvent[],
  dropped: number,
  mask: (text: string) => string,
): Partial<StepEvents> {
  const console = events
    .filter((e) => e.kind !== 'request')
    .map((e) => ({ level: e.kind === 'page-error' ? 'page-error' : e.level, text: mask(e.text) }));
  const network = events
    .filter((e) => e.kind === 'request')
    .map((e) => ({ status: e.level, text: mask(e.text) }));
  return {
    ...(console.length ? { console } : {}),
    ...(network.length ? { network } : {}),
    ...(dropped ? { eventsDropped: dropped } : {}),
  };
}
