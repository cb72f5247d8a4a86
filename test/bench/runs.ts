/**
 * `npm run bench:runs`: what a test run costs, measured against the local server (the same handlers and
 * `testRun` state machine as in AWS; Debian's chromium through playwright-core).
 *
 * A 5-step test (navigate, input-text, click, assert-text, assert-visible) against the fixture app of
 * the run tests, deployed as an application's main-branch environment. After one unmeasured warm-up run:
 * POST /test/{id}/run → `passed`, as a caller sees it (polling GET /run every 100 ms: at 20 ms the polls, served by the same process, took event-loop time from the run they waited for, 0.35 s of a 2.65 s run), median/min/max of 5,
 * and the browser's share of it: the time spent inside the Browser port (opening a session: a launch when
 * cold, a fresh context in the warm browser otherwise; the steps and their screenshots; closing: stopping
 * and masking the trace, encoding the video), measured by wrapping the port. The first run (cold: the
 * server's browser not launched yet) is printed apart, and the trace's cost: its bytes, and the time of
 * starting/stopping it, measured as the difference to a run of the same session without a trace.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import { LocalChromium } from '../../functions/ports/browser/local-chromium.js';
import type { Browser, BrowserSession } from '../../functions/ports/browser/port.js';
import { provideLocalAdapters } from '../../functions/ports/registry.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call, client, linkRepo } from '../support/api.js';
import { pollUntil } from '../support/apps.js';
import { makeRepo } from '../support/git.js';
import { RUNS_APP_JS, RUNS_APP_YAML, signUpSteps, step } from '../support/runs-app.js';
import { median } from './report.js';

const RUNS = 5;
const POLL_MS = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ms = (n: number) => `${n.toFixed(0)} ms`;

/** Time spent in the Browser port, by phase, for the current run. */
const spent = { launch: 0, steps: 0, shots: 0, close: 0 };
function timed(inner: Browser): Browser {
  const time = async <T>(phase: keyof typeof spent, work: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await work();
    } finally {
      spent[phase] += performance.now() - t0;
    }
  };
  return {
    missing: () => inner.missing(),
    ...(inner.turn ? { turn: () => inner.turn!() } : {}),
    open: async (opts) => {
      const s = await time('launch', () => inner.open(opts));
      const wrapped: BrowserSession = {
        goto: (...a) => time('steps', () => s.goto(...a)),
        click: (...a) => time('steps', () => s.click(...a)),
        fill: (...a) => time('steps', () => s.fill(...a)),
        press: (...a) => time('steps', () => s.press(...a)),
        waitVisible: (...a) => time('steps', () => s.waitVisible(...a)),
        waitForText: (...a) => time('steps', () => s.waitForText(...a)),
        screenshot: (...a) => time('shots', () => s.screenshot(...a)),
        url: () => s.url(),
        crashed: () => s.crashed(),
        takeRefusals: () => s.takeRefusals(),
        ...(s.beginStep ? { beginStep: (title: string) => time('steps', () => s.beginStep!(title)) } : {}),
        ...(s.takeEvents ? { takeEvents: () => s.takeEvents!() } : {}),
        close: (o) => time('close', () => s.close(o)),
      };
      return wrapped;
    },
  };
}

/** Median of (session with a trace − without) over 5 pairs: open, the 5 steps' actions, close. */
async function traceCost(browser: Browser, appUrl: string): Promise<number> {
  const session = async (trace: boolean) => {
    const t0 = performance.now();
    const s = await browser.open({
      viewport: { width: 1280, height: 720 },
      video: true,
      trace,
      allowedOrigins: [new URL(appUrl).origin],
    });
    await s.goto(`${appUrl}/`, 10_000);
    await s.fill('#email', 'bench@example.com', 5_000);
    await s.click('#submit', 5_000);
    await s.waitForText('Welcome', '#greeting', 5_000);
    await s.waitVisible('#home', 5_000);
    await s.close({ mask: (t) => t });
    return performance.now() - t0;
  };
  const diffs: number[] = [];
  for (let i = 0; i < 5; i++) diffs.push((await session(true)) - (await session(false)));
  return median(diffs);
}

setLogSink(() => {});
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-runs-'));
const gitRoot = mkdtempSync(join(tmpdir(), 'preview-bench-runs-git-'));
let service: LocalService | undefined;
let local: LocalChromium | undefined;
try {
  service = await startLocal({ dataDir, gitRoot, port: 0 });
  // The same local browser the server installs, wrapped to time it (installed before any run asks).
  local = new LocalChromium();
  const missing = local.missing();
  if (missing) throw new Error(missing);
  const browser = local;
  provideLocalAdapters({ browser: () => timed(browser) });

  const org = service.credentials;
  makeRepo(gitRoot, 'bench/runs', { 'preview.yaml': RUNS_APP_YAML, 'server.js': RUNS_APP_JS });
  const applicationId = await linkRepo(org, 'bench/runs');
  await call(service, 'POST', `/v1/preview/applications/${applicationId}/0`, { headers: bearer(org) });
  const env = await pollUntil(
    service,
    org,
    '/v1/preview/environments/bench/runs/0',
    (s) => s.status === 'ready',
    60_000,
  );
  const { tests } = await importTests(org.orgId, [
    {
      name: 'Five steps',
      folder: { id: 'bench', name: 'Bench' },
      application_id: applicationId,
      application_version: { name: 'web', path: '/' },
      variables: { EMAIL: 'bench@example.com' },
      steps: [...signUpSteps, step('assert-visible', 'The link back is visible', { selector: '#home' })],
    },
  ]);
  const testId = tests[0]!.id;

  const once = async () => {
    spent.launch = spent.steps = spent.shots = spent.close = 0;
    const t0 = performance.now();
    const res = await call(service!, 'POST', `/test/${testId}/run`, { headers: client(org) });
    const runId = res.body.run_id as string;
    for (;;) {
      const run = await call(service!, 'GET', `/run/${runId}`, { headers: client(org) });
      if (run.body.status === 'passed') break;
      if (run.body.status === 'failed') throw new Error(`run failed: ${run.body.error}`);
      await sleep(POLL_MS);
    }
    const total = performance.now() - t0;
    const got = await call(service!, 'GET', `/run/${runId}?media=true`, { headers: client(org) });
    const traceBytes = got.body.trace_url
      ? (await (await fetch(got.body.trace_url as string)).arrayBuffer()).byteLength
      : 0;
    return { total, ...spent, browser: spent.launch + spent.steps + spent.shots + spent.close, traceBytes };
  };

  const cold = await once(); // cold: module loading, the first chromium launch
  const samples = [];
  for (let i = 0; i < RUNS; i++) samples.push(await once());
  const totals = samples.map((s) => s.total);
  // The trace's time: the same five actions in a warm session, with and without a trace (5 pairs).
  const traceMs = await traceCost(browser, env.urls.web as string);
  const m = median(totals);
  const browserMedian = median(samples.map((s) => s.browser));
  const row = (label: string, values: number[]) =>
    `  ${label.padEnd(34)} median ${ms(median(values)).padStart(8)}   min ${ms(Math.min(...values)).padStart(8)}   max ${ms(Math.max(...values)).padStart(8)}`;
  process.stdout.write(
    [
      `test runs: a 5-step test, POST → passed, ${RUNS} runs after a warm-up`,
      row('POST → passed', totals),
      row(
        'in the browser (all of it)',
        samples.map((s) => s.browser),
      ),
      row(
        '  opening the session (warm: a context)',
        samples.map((s) => s.launch),
      ),
      row(
        '  steps and their screenshots',
        samples.map((s) => s.steps + s.shots),
      ),
      row(
        '    of which the screenshots',
        samples.map((s) => s.shots),
      ),
      row(
        '  closing: trace, video encode',
        samples.map((s) => s.close),
      ),
      row(
        'the rest (API, state machine, DB)',
        samples.map((s) => s.total - s.browser),
      ),
      `  the browser's share of POST → passed: ${((browserMedian / m) * 100).toFixed(0)}% (median browser time / median total)`,
      `  cold (the first run, chromium launched): POST → passed ${ms(cold.total)}, opening the session ${ms(cold.launch)}`,
      `  trace: ${(median(samples.map((s) => s.traceBytes)) / 1024).toFixed(0)} KB per run (median); its time: ${ms(traceMs)} per run (median session with a trace − without, same steps)`,
      '',
    ].join('\n'),
  );
} finally {
  await local?.stop();
  await service?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
}
