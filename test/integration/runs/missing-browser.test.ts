import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { describeTestRunTools } from '../../../lib/local/test-runs.js';
import { call, client } from '../../support/harness.js';
import { type RunsWorld, runEnded, signUpSteps, startRunsWorld } from '../../support/runs-app.js';

/*
 * A host without the browser (or ffmpeg): `npm start` says what to install, and runs end failed with
 * that message instead of hanging (issue 11, decision 3).
 */

let w: RunsWorld;
const saved = { browser: process.env.PREVIEW_BROWSER_PATH, ffmpeg: process.env.PREVIEW_FFMPEG_PATH };
beforeAll(async () => {
  // Read by the configuration when the local server starts (this file's first use of it).
  process.env.PREVIEW_BROWSER_PATH = '/nonexistent/chromium';
  process.env.PREVIEW_FFMPEG_PATH = 'no-such-ffmpeg';
  w = await startRunsWorld({ repo: 'acme/nobrowser' });
}, 120_000);
afterAll(async () => {
  await w?.stop();
  for (const [name, value] of [
    ['PREVIEW_BROWSER_PATH', saved.browser],
    ['PREVIEW_FFMPEG_PATH', saved.ffmpeg],
  ] as const)
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
}, 60_000);

const MISSING =
  'test runs need chromium (/nonexistent/chromium) and ffmpeg (no-such-ffmpeg), which are not installed: ' +
  'install with `apt-get install -y chromium ffmpeg` (Debian/Ubuntu), or point PREVIEW_BROWSER_PATH / ' +
  'PREVIEW_FFMPEG_PATH at them';

test('the start line says what to install; a run ends failed with the same message', async () => {
  expect(describeTestRunTools()).toBe(`test runs: WILL FAIL: ${MISSING}`);
  const testId = await w.importTest({});
  const res = await call(w.h, 'POST', `/test/${testId}/run`, { headers: client(w.h.org) });
  expect(res.status).toBe(201);
  const run = await runEnded(w.h, res.body.run_id, 20_000);
  expect(run).toMatchObject({ status: 'failed', error: MISSING, video_url: null });
  expect(run.steps.map((s: any) => s.status)).toEqual(signUpSteps.map(() => 'skipped'));
});
