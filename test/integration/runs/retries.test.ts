import { expect, test } from '@jest/globals';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { ValidationError } from '../../../functions/shared/errors.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded, step } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';

/*
 * Retries that name flakes. A test with `retries: 1` whose page fails the first time
 * and passes the second ends `passed`, `flaky`, with both attempts and each its own video and trace.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/retries' });
const start = async (testId: string) => (await startRun(h, testId)).run_id;

/** runEnded, tolerating a poll the busy local server resets (trace masking of two attempts). */
async function ended(runId: string, timeoutMs: number): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await runEnded(h, runId, Math.max(1_000, deadline - Date.now()));
    } catch (err) {
      if (Date.now() >= deadline || !/fetch failed/.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

const flakySteps = (key: string) => [
  step('navigate', 'Open the flaky page', { url: `/flaky?key=${key}` }),
  step('assert-text', 'It says "Ready"', { selector: '#state' }),
];

test('a test with retries: 1 that fails once then passes ends passed, flaky, with two attempts and their media', async () => {
  const testId = await app.importTest({
    name: 'Flaky page',
    retries: 1,
    step_timeout_seconds: 3,
    steps: flakySteps('a'),
  });
  const runId = await start(testId);
  const run = await ended(runId, 120_000);
  expect(run.status).toBe('passed');
  expect(run.metadata).toMatchObject({ attempts: 2, flaky: true });
  expect(run.steps.map((s: any) => s.status)).toEqual(['passed', 'passed']);
  expect(run.video_url).toEqual(expect.any(String));
  const { loadRun } = await import('../../../functions/core/runs/store.js');
  const item = await loadRun(runId);
  expect(item?.flaky).toBe(true);
  expect(item?.attempts?.map((a) => [a.number, a.status, a.steps])).toEqual([
    [1, 'failed', ['passed', 'failed']],
    [2, 'passed', ['passed', 'passed']],
  ]);
  expect(item?.attempts?.[0]?.error).toMatch(/^step 2 \(assert-text\) failed/);
  const [one, two] = item!.attempts!;
  // The first attempt's media keep the run's keys; a retry's are under `attempt-N/` (core/run-media.ts).
  expect(one!.videoKey).toMatch(/^runs\/.+\/video\.\w+$/);
  expect(one!.videoKey).not.toMatch(/attempt-/);
  expect(two!.videoKey).toMatch(/\/attempt-2\/video\.\w+$/);
  expect(one!.traceKey).toMatch(/^runs\/.+\/trace\.zip$/);
  expect(one!.traceKey).not.toMatch(/attempt-/);
  expect(two!.traceKey).toMatch(/\/attempt-2\/trace\.zip$/);
  expect(item!.videoKey).toBe(two!.videoKey);
  expect(item!.traceKey).toBe(two!.traceKey);
  // GET /run?flaky=true lists it (the sparse listFlaky index), with its test too; not without flaky runs.
  for (const q of ['flaky=true', `flaky=true&test=${testId}`, 'flaky=true&status=passed']) {
    const listed = await call(h, 'GET', `/run?${q}`, { headers: client(h.org) });
    expect(listed.status).toBe(200);
    expect(listed.body.map((r: any) => [r.id, r.metadata.flaky])).toContainEqual([runId, true]);
  }
  const failedOnly = await call(h, 'GET', '/run?flaky=true&status=failed', { headers: client(h.org) });
  expect(failedOnly.body).toEqual([]);
}, 150_000);

test('without retries the same page fails once and the run ends failed, one attempt, not flaky', async () => {
  const testId = await app.importTest({
    name: 'Flaky page, no retries',
    step_timeout_seconds: 3,
    steps: flakySteps('b'),
  });
  const run = await ended(await start(testId), 90_000);
  expect(run.status).toBe('failed');
  expect(run.metadata.attempts).toBe(1);
  expect(run.metadata.flaky).toBeUndefined();
  const listed = await call(h, 'GET', `/run?flaky=true&test=${testId}`, { headers: client(h.org) });
  expect(listed.body).toEqual([]);
}, 120_000);

test.each([
  [4, 'invalid tests file: [0].retries: must be at most 3'],
  [-1, 'invalid tests file: [0].retries: must be at least 0'],
  [1.5, 'invalid tests file: [0].retries: must be a whole number'],
])('retries %p is refused at import', async (retries, message) => {
  const file = [
    {
      name: 'Bad retries',
      folder: { id: 'f', name: 'F' },
      application_version: { name: 'web', path: '/' },
      steps: flakySteps('c'),
      retries,
    },
  ];
  const result = importTests(h.org.orgId, file);
  await expect(result).rejects.toThrow(ValidationError);
  await expect(result).rejects.toThrow(message);
});
