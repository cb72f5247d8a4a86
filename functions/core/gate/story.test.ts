import { describe, expect, test } from '@jest/globals';
import { allEnded, conclusionOf, type GateRun, renderOutput } from './story.js';

const run = (over: Partial<GateRun>): GateRun => ({
  runId: 'r1',
  testId: 't1',
  name: 'Sign up',
  status: 'passed',
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:02.500Z',
  retries: 0,
  flaky: false,
  ...over,
});

describe('conclusionOf', () => {
  test('success when every test passed, a flaky pass included', () => {
    expect(conclusionOf([run({}), run({ runId: 'r2', flaky: true, retries: 1 })])).toBe('success');
  });
  test('failure when a test failed, or the preview failed', () => {
    expect(conclusionOf([run({}), run({ status: 'failed' })])).toBe('failure');
    expect(conclusionOf([], { kind: 'preview-failed', error: 'build failed' })).toBe('failure');
  });
  test('a quarantined failure does not fail the gate', () => {
    expect(conclusionOf([run({ status: 'failed', quarantined: true })])).toBe('success');
  });
  test('neutral when skipped, cancelled when superseded or closed, whatever the runs did', () => {
    const failed = [run({ status: 'failed' })];
    expect(conclusionOf(failed, { kind: 'skipped', by: 'octocat', reason: 'docs only' })).toBe('neutral');
    expect(conclusionOf(failed, { kind: 'superseded', newerSha: 'b'.repeat(40) })).toBe('cancelled');
    expect(conclusionOf(failed, { kind: 'closed' })).toBe('cancelled');
  });
});

describe('renderOutput', () => {
  test('a quarantined failure: success, its title says so, the summary names owner, end and reason', () => {
    const out = renderOutput(
      [
        run({}),
        run({
          runId: 'r2',
          name: 'Log in',
          status: 'failed',
          quarantined: true,
          quarantine: { owner: 'alice', reason: 'flaky redirect', until: '2026-01-20T00:00:00.000Z' },
        }),
      ],
      undefined,
      true,
    );
    expect(out.title).toBe('1 test passed, 1 quarantined failure ignored');
    expect(out.summary).toContain('| Log in | `failed (quarantined)` |');
    expect(out.summary).toContain('- Log in: owner alice, until 2026-01-20, flaky redirect');
    expect(out.text).toContain('### Log in (quarantined: does not fail the gate)');
  });
  test('a line per test: status, duration, retries and its report; flaky ones named', () => {
    const out = renderOutput(
      [
        run({ reportUrl: 'https://x/report/r1' }),
        run({ runId: 'r2', name: 'Log in', flaky: true, retries: 2 }),
      ],
      undefined,
      true,
    );
    expect(out.title).toBe('2 tests passed, 1 flaky');
    expect(out.summary).toContain('| Sign up | `passed` | 2.5 s | 0 | [report](https://x/report/r1) |');
    expect(out.summary).toContain('| Log in | `passed (flaky)` | 2.5 s | 2 | `r2` |');
    expect(out.summary).toContain('Flaky (passed after a retry): Log in.');
    expect(out.text).toBeUndefined();
  });

  test('a failure: its failed step, its error and its screenshot in the text', () => {
    const out = renderOutput(
      [
        run({
          status: 'failed',
          error: 'step 2 (click) failed: no button',
          failedStep: { number: 2, interaction: 'click', output: 'no button', screenshot: 'https://x/s.png' },
        }),
      ],
      undefined,
      true,
    );
    expect(out.title).toBe('1 test failed of 1');
    expect(out.text).toContain('Failed step 2 (`click`)');
    expect(out.text).toContain('step 2 (click) failed: no button');
    expect(out.text).toContain('[Screenshot](https://x/s.png)');
  });

  test('a failing preview is told apart from a failing test, and from a preview that never answered', () => {
    expect(renderOutput([], { kind: 'preview-failed', error: 'build failed' }, true).title).toBe(
      'The preview failed: no test ran against it',
    );
    const asleep = renderOutput(
      [run({ status: 'failed', errorKind: 'environment', error: 'environment pr-7 never woke' })],
      undefined,
      true,
    );
    expect(asleep.title).toBe('The preview never answered: 1 test could not run against it');
    expect(asleep.summary).toContain('`failed (preview never answered)`');
  });

  test('cancelled names the newer commit; skipped names who and why; fences in errors are defused', () => {
    const newer = 'c'.repeat(40);
    const out = renderOutput([], { kind: 'superseded', newerSha: newer }, true);
    expect(out.title).toBe(`Cancelled: superseded by ${newer.slice(0, 12)}`);
    expect(out.summary).toContain(newer);
    expect(renderOutput([], { kind: 'skipped', by: 'octocat', reason: 'docs only' }, true).title).toBe(
      'Skipped by octocat: docs only',
    );
    const fenced = renderOutput([run({ status: 'failed', error: '```\nboom' })], undefined, true);
    expect(fenced.text).not.toContain('```\nboom');
  });

  test('in progress: how many of the tests are done', () => {
    const runs = [run({}), run({ runId: 'r2', status: 'running' })];
    expect(allEnded(runs)).toBe(false);
    expect(renderOutput(runs, undefined, false).title).toBe('Running: 1 of 2 tests done');
    expect(renderOutput([], undefined, false).title).toBe('Waiting for the preview');
  });
});
