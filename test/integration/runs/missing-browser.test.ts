import { expect, test } from '@jest/globals';
import { describeTestRunTools } from '../../../lib/local/test-runs.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded, signUpSteps } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';

/*
 * A host without the browser (or ffmpeg): `npm start` says what to install, and runs end failed with
 * that message instead of hanging.
 */

// Read by the configuration when the local server starts (this file's first use of it).
const h = localServerForFile({
  env: { PREVIEW_BROWSER_PATH: '/nonexistent/chromium', PREVIEW_FFMPEG_PATH: 'no-such-ffmpeg' },
});
const app = runsAppForFile(h, { repo: 'acme/nobrowser' });

const MISSING =
  'test runs need chromium (/nonexistent/chromium) and ffmpeg (no-such-ffmpeg), which are not installed: ' +
  'install with `apt-get install -y chromium ffmpeg` (Debian/Ubuntu), or point PREVIEW_BROWSER_PATH / ' +
  'PREVIEW_FFMPEG_PATH at them';

test('the start line says what to install; a run ends failed with the same message', async () => {
  expect(describeTestRunTools()).toBe(`test runs: WILL FAIL: ${MISSING}`);
  const testId = await app.importTest({});
  const res = await call(h, 'POST', `/test/${testId}/run`, { headers: client(h.org) });
  expect(res.status).toBe(201);
  const run = await runEnded(h, res.body.run_id, 20_000);
  expect(run).toMatchObject({ status: 'failed', error: MISSING, video_url: null });
  expect(run.steps.map((s: any) => s.status)).toEqual(signUpSteps.map(() => 'skipped'));
});
