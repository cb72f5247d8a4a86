import { readdirSync, readFileSync } from 'node:fs';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, jest, test } from '@jest/globals';
import { recoverRuns } from '../../../functions/core/runs/recovery.js';
import { keys } from '../../../functions/manifest/tables.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { runEnded, signUpSteps, step } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';

/*
 * Failures and restarts. The target app going down mid-run fails the step with the
 * browser's error; a browser that dies fails the run with that cause; timeouts fail the run saying which;
 * after a restart no run is left running (recoverRuns, which the local server's recovery calls).
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/failures' });
const start = async (testId: string) => (await startRun(h, testId)).run_id;

async function untilRunning(runId: string, stepIndex = 0): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(h.org) });
    if (
      res.body.status === 'running' &&
      res.body.steps.slice(0, stepIndex).every((s: any) => s.status === 'passed')
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`run ${runId} never got to step ${stepIndex + 1}`);
}

/** Chromium processes this process launched (Playwright runs them with a debugging pipe). */
function ourBrowsers(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (ppid === process.pid && cmd.includes('--remote-debugging-pipe')) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

test('the target app going down mid-run fails the step with the browser error', async () => {
  const testId = await app.importTest({
    name: 'App goes down',
    // The `api` app runs the same server; `web` stays up for the other tests.
    application_version: { name: 'api', path: '/' },
    steps: [
      step('navigate', 'Open the page that takes the app down', { url: '/exit' }),
      step('assert-text', 'It says "Going down"'),
      step('navigate', 'Open the form again', { url: '/' }),
      step('assert-text', 'It says "Sign up"'),
    ],
  });
  const runId = await start(testId);
  const run = await runEnded(h, runId);
  expect(run.status).toBe('failed');
  expect(run.steps.map((s: any) => s.status)).toEqual(['passed', 'passed', 'failed', 'skipped']);
  // Refused where the app's port is on this machine's network; with a network per environment the
  // host's side of the port is pasta's forwarder, which accepts and then resets (or drops) the connection
  // when nothing listens inside.
  expect(run.steps[2].output).toMatch(
    /^page\.goto: net::ERR_(CONNECTION_REFUSED|CONNECTION_RESET|SOCKET_NOT_CONNECTED|EMPTY_RESPONSE) at http:\/\/127\.0\.0\.1:(\d+)\/ \| navigating to "http:\/\/127\.0\.0\.1:\2\/", waiting until "load"$/,
  );
  expect(run.error).toBe(`step 3 (navigate) failed: ${run.steps[2].output}`);
}, 60_000);

test('a secret bundle that cannot be read: the run does not start (its output could not be masked)', async () => {
  const testId = await app.importTest({ name: 'Unmaskable', steps: signUpSteps });
  const read = jest
    .spyOn(secretStore(), 'read')
    .mockRejectedValueOnce(Object.assign(new Error('unavailable'), { name: 'ServiceUnavailableError' }));
  const before = new Set(ourBrowsers());
  try {
    const run = await runEnded(h, await start(testId), 30_000);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(
      "the secret bundle of app api could not be read (ServiceUnavailableError), so the run's output could " +
        'not be masked: the run did not start; run it again',
    );
    expect(run.steps.map((s: any) => s.status)).toEqual(signUpSteps.map(() => 'skipped'));
    expect(read).toHaveBeenCalled();
    // No browser was opened for it.
    expect(ourBrowsers().filter((pid) => !before.has(pid))).toEqual([]);
  } finally {
    read.mockRestore();
  }
}, 60_000);

test('a warm browser that dies mid-run fails that run with the cause; the next run gets a new browser and passes', async () => {
  const testId = await app.importTest({
    name: 'Browser dies',
    step_timeout_seconds: 60,
    steps: [
      step('navigate', 'Open', { url: '/' }),
      step('wait-for', 'Wait forever', { selector: '#never' }),
      ...signUpSteps,
    ],
  });
  const runId = await start(testId);
  await untilRunning(runId, 1);
  // The warm browsers: the run's, and any idle one kept for the next run.
  const killed = ourBrowsers();
  expect(killed.length).toBeGreaterThan(0);
  for (const pid of killed) process.kill(pid, 'SIGKILL');
  const run = await runEnded(h, runId, 30_000);
  expect(run.status).toBe('failed');
  expect(run.error).toBe(
    'the browser died during step 2 (wait-for): the browser exited unexpectedly (crashed or was killed)',
  );
  expect(run.steps.map((s: any) => s.status)).toEqual([
    'passed',
    'failed',
    ...signUpSteps.map(() => 'skipped'),
  ]);
  expect(run.steps[1].output).toContain(
    '(the browser died: the browser exited unexpectedly (crashed or was killed))',
  );
  // The next run launches a browser of its own and passes.
  const next = await runEnded(h, await start(await app.importTest({ name: 'After the crash' })), 30_000);
  expect([next.status, next.error]).toEqual(['passed', undefined]);
  expect(ourBrowsers().filter((pid) => killed.includes(pid))).toEqual([]);
}, 90_000);

test('a step that takes longer than its timeout fails; the run, past its own limit, fails saying so', async () => {
  const slowStep = await app.importTest({
    name: 'Step timeout',
    step_timeout_seconds: 1,
    steps: [
      step('navigate', 'Open', { url: '/late?ms=10000' }),
      step('wait-for', 'The late button', { selector: '#late' }),
    ],
  });
  const slowRun = await app.importTest({
    name: 'Run timeout',
    run_timeout_seconds: 5,
    steps: Array.from({ length: 5 }, () => [
      step('navigate', 'Open', { url: '/late' }),
      step('wait-for', 'The late button', { selector: '#late' }),
    ]).flat(),
  });
  const [a, b] = await Promise.all([runEnded(h, await start(slowStep)), runEnded(h, await start(slowRun))]);
  expect(a.error).toBe(
    'step 2 (wait-for) failed: #late did not appear within 1 s; no element of the page is like it',
  );
  expect(b.status).toBe('failed');
  expect(b.error).toMatch(
    /^the run timed out after 5 s \(its limit\) (during|before) step \d+ \((navigate|wait-for)\)$/,
  );
  const failed = b.steps.findIndex((s: any) => s.status === 'failed');
  expect(b.steps.slice(0, failed).every((s: any) => s.status === 'passed')).toBe(true);
  expect(b.steps.slice(failed + 1).every((s: any) => s.status === 'skipped')).toBe(true);
  expect(Date.parse(b.ended_at) - Date.parse(b.created_at)).toBeLessThan(12_000);
}, 60_000);

describe('after a restart no run is left running', () => {
  /** What a killed server leaves: a run marked running (or pending) with nothing behind it. */
  async function orphan(status: 'running' | 'pending'): Promise<string> {
    const testId = await app.importTest({
      name: `Orphan ${status}`,
      application_version: { name: 'nope', path: '/' },
    });
    // Created pending with an execution that fails it at once (no app "nope"); then forced back.
    const runId = await start(testId);
    await runEnded(h, runId);
    await ddb().send(
      new UpdateCommand({
        TableName: table('runs'),
        Key: { runId },
        UpdateExpression: 'SET #s = :s, statusKey = :k, attempt = :a, steps = :steps REMOVE endedAt, #e',
        ExpressionAttributeNames: { '#s': 'status', '#e': 'error' },
        ExpressionAttributeValues: {
          ':s': status,
          ':k': keys.runs.byStatus(h.org.orgId, status),
          ':a': 'killed-attempt',
          ':steps': signUpSteps.map((s, i) => ({
            id: `s${i}`,
            instruction: s.instruction,
            interaction: s.interaction,
            url: s.url ?? '',
            element: s.element ?? { html: '', selector: '' },
            output: '',
            status: i === 0 && status === 'running' ? 'passed' : 'pending',
          })),
        },
      }),
    );
    return runId;
  }

  test('recoverRuns: runs left running or pending end failed, each saying why', async () => {
    const running = await orphan('running');
    const pending = await orphan('pending');
    expect(await recoverRuns()).toEqual({ failed: 2 });
    const a = await runEnded(h, running, 10_000);
    expect(a.status).toBe('failed');
    expect(a.error).toBe('interrupted: the service restarted while the run was running');
    expect(a.steps.map((s: any) => s.status)).toEqual(['passed', 'skipped', 'skipped', 'skipped']);
    const b = await runEnded(h, pending, 10_000);
    expect(b.status).toBe('failed');
    expect(b.error).toBe('interrupted: the service restarted before the run started; start it again');
    expect(b.steps.map((s: any) => s.status)).toEqual(['skipped', 'skipped', 'skipped', 'skipped']);
    for (const status of ['running', 'pending']) {
      const res = await call(h, 'GET', `/run?status=${status}`, { headers: client(h.org) });
      expect([status, res.body]).toEqual([status, []]);
    }
    // Nothing left: a second recovery changes nothing.
    expect(await recoverRuns()).toEqual({ failed: 0 });
  });
});
