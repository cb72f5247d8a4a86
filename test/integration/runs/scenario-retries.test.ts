import { expect, test } from '@jest/globals';
import { testRunShortId } from '../../../functions/core/recipes/versions.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded } from '../../support/runs-app.js';
import { factoryAppForFile } from '../../support/runs-suite.js';

/*
 * Retries with a scenario: each attempt of a retried run is wrapped in its own `up` and `down`
 * with fresh tokens (`testRunId` `<run id>-<N>` from the second attempt), so attempts never share data.
 * The fixture web app shows the `x-run` header the factory answered for the attempt (its testRunId); the
 * test asserts it holds "-2", which only the second attempt's does: the first attempt fails, the second
 * passes, and the run ends `passed`, flaky, after up/down, up/down.
 */

const h = localServerForFile();
const app = factoryAppForFile(h, 'acme/factory-retries');

test('a scenario run with retries: 1 that fails once then passes: each attempt its own up and down, fresh tokens', async () => {
  const testId = await app.importTest({
    name: 'Second attempt only',
    retries: 1,
    step_timeout_seconds: 3,
    steps: [
      {
        interaction: 'assert-text',
        instruction: 'The page says "Signed in as qa+"',
        element: { html: '', selector: '#who' },
      },
      {
        interaction: 'assert-text',
        instruction: 'The run id says "-2"',
        element: { html: '', selector: '#run' },
      },
    ],
  });
  const started = await call(h, 'POST', `/test/${testId}/run`, { headers: client(h.org), body: {} });
  expect(started.status).toBe(201);
  const runId = started.body.run_id as string;
  const run = await runEnded(h, runId, 150_000);

  // The run: passed on its second attempt, flaky.
  expect(run.status).toBe('passed');
  expect(run.metadata).toMatchObject({ attempts: 2, flaky: true });
  const { loadRun } = await import('../../../functions/core/runs/store.js');
  const item = await loadRun(runId);
  expect(item?.attempts?.map((a) => [a.number, a.status, a.steps])).toEqual([
    [1, 'failed', ['passed', 'failed']],
    [2, 'passed', ['passed', 'passed']],
  ]);

  // The factory: up and down of attempt 1, then up and down of attempt 2, each signed, in that order.
  const second = `${runId}-2`;
  const got = (await app.received()).filter((r) => [runId, second].includes(r.body?.testRunId));
  expect(got.map((r) => [r.body.action, r.body.testRunId, r.verified])).toEqual([
    ['up', runId, true],
    ['down', runId, true],
    ['up', second, true],
    ['down', second, true],
  ]);
  // Fresh tokens: each up's recipe is substituted with its own attempt's ids, so its user is another.
  const [up1, down1, up2, down2] = got.map((r) => r.body);
  const short1 = testRunShortId(runId);
  const short2 = testRunShortId(second);
  expect(short2).not.toBe(short1);
  expect(up1.testRunShortId).toBe(short1);
  expect(up2.testRunShortId).toBe(short2);
  expect(up1.create.users[0]).toMatchObject({
    email: `qa+${short1}@example.com`,
    tags: [`run-${runId}`, expect.anything()],
  });
  expect(up2.create.users[0]).toMatchObject({
    email: `qa+${short2}@example.com`,
    tags: [`run-${second}`, expect.anything()],
  });
  expect(JSON.stringify(up2)).not.toContain(short1);
  // Each down names what its own up created (its refs), never the other attempt's.
  expect(down1.refs).toEqual({ email: `qa+${short1}@example.com` });
  expect(down2.refs).toEqual({ email: `qa+${short2}@example.com` });
  // What the browser saw in the attempt that passed: the `x-run` its own up answered (`<run id>-2`).
  expect(run.steps[1].output).toContain('found "-2"');
}, 240_000);
