import { afterAll, beforeAll, expect } from '@jest/globals';
import { call, client } from './harness.js';
import { type RunsWorld, startRunsWorld } from './runs-app.js';

/*
 * The run tests' shared setup that needs Jest (its hooks and expect); test/support/runs-app.ts stays
 * importable outside Jest (the benches use its fixture app).
 */

/**
 * A RunsWorld for a test file: started before its tests (and before the hooks the file registers after
 * this call), stopped after them. The object is filled in when the file's tests start: read it in hooks
 * and tests, not while the file loads.
 */
export function runsWorldForFile(opts: Parameters<typeof startRunsWorld>[0] = {}): RunsWorld {
  const w = {} as RunsWorld;
  beforeAll(async () => {
    Object.assign(w, await startRunsWorld(opts));
  }, 120_000);
  afterAll(async () => {
    await w.stop?.();
  }, 60_000);
  return w;
}

/** Start a run of `testId` as the world's organization (`body`: the run's options); 201 expected. */
export async function startRun(
  w: RunsWorld,
  testId: string,
  body?: unknown,
): Promise<{ run_id: string; url: string }> {
  const res = await call(w.h, 'POST', `/test/${testId}/run`, { headers: client(w.h.org), body });
  expect(res.status).toBe(201);
  return res.body;
}
