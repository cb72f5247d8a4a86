/**
 * `npm run bench:pipeline`: the deploy pipeline's own cost, measured against the local server (the same
 * handlers and ASL state machines as in AWS, apps run as local processes).
 *
 *  (a) POST → `ready` for a trivial app (no build), median/min/max of 10 deploys, each to a new PR
 *      number (a fresh environment every time), after one unmeasured warm-up deploy;
 *  (b) the same app started directly (no pipeline) until /healthz answers 200, median of 10, and the
 *      overhead: median(POST → ready) − median(app start). Target: under 2 s.
 *  (c) state transitions of a successful deploy with a short and with a long simulated build.
 *      Target: equal (builds are callback tasks, nothing polls while they run).
 *
 * Exit code 0 when both targets are met, 1 otherwise.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { statusPath } from '../../functions/core/environments/lifecycle.js';
import { keys } from '../../functions/manifest/tables.js';
import type { ExecutionRecord } from '../../functions/ports/workflows/local-asl.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call, linkRepo } from '../support/api.js';
import { SERVER_JS, type Status } from '../support/apps.js';
import { makeRepo } from '../support/git.js';
import { freePort } from '../support/process.js';
import { median, runBench } from './report.js';

const RUNS = 10;
const STATUS_POLL_MS = 20;
const HEALTH_POLL_MS = 10;
const OVERHEAD_TARGET_MS = 2_000;
const SHORT_BUILD_MS = 200;
const LONG_BUILD_MS = 8_000;

const appYaml = (build?: string) =>
  [
    'apps:',
    '  web:',
    '    port: 3000',
    ...(build ? [`    build: ${JSON.stringify(build)}`] : []),
    '    command: node server.js',
    '    health: /healthz',
    '',
  ].join('\n');
const sleepBuild = (ms: number) => `node -e "setTimeout(()=>{},${ms})"`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ms = (n: number) => `${n.toFixed(0)} ms`;
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

setLogSink(() => {}); // the service's own log lines would drown the table
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-data-'));
const gitRoot = mkdtempSync(join(tmpdir(), 'preview-bench-git-'));
let service: LocalService | undefined;

/** POST a deploy, then poll its status every STATUS_POLL_MS until ready/failed; wall time in ms. */
async function deploy(repoFullName: string, prNumber: number, headSha: string) {
  const auth = bearer(service!.credentials);
  const path = statusPath(repoFullName, prNumber);
  const started = performance.now();
  const res = await call(service!, 'POST', '/v1/preview/environments', {
    body: { repoFullName, prNumber, headSha, headRef: 'feature' },
    headers: auth,
  });
  if (res.status !== 202)
    throw new Error(`POST ${repoFullName}#${prNumber} answered ${res.status}: ${res.text}`);
  const deadline = started + 60_000;
  while (performance.now() < deadline) {
    const s = await call<Status>(service!, 'GET', path, { headers: auth });
    if (s.status === 200 && s.body.status === 'ready') return performance.now() - started;
    if (s.status === 200 && s.body.status === 'failed')
      throw new Error(`${repoFullName}#${prNumber} failed: ${s.body.error}`);
    await sleep(STATUS_POLL_MS);
  }
  throw new Error(`${repoFullName}#${prNumber} was not ready within 60 s`);
}

/** The finished, successful deploy execution of one environment (waits for it to end). */
async function deployExecution(repoFullName: string, prNumber: number): Promise<ExecutionRecord> {
  await service!.workflows.idle();
  await sleep(50); // let the event-log reader count the last events
  const envKey = keys.environments.envKey(repoFullName, prNumber);
  const found = [...service!.workflows.executions.values()].filter(
    (e) => e.workflow === 'deploy' && e.input.envKey === envKey && e.status === 'succeeded',
  );
  if (found.length !== 1) throw new Error(`${found.length} succeeded deploy executions for ${envKey}`);
  return found[0]!;
}

/** Spawn `node server.js` with PORT set and time it until /healthz answers 200. */
async function appStart(cwd: string): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child: ChildProcess = spawn('node', ['server.js'], {
    cwd,
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: 'ignore',
  });
  const exited = new Promise((r) => child.once('exit', r));
  try {
    while (performance.now() - started < 30_000) {
      if (child.exitCode !== null) throw new Error(`node server.js exited with ${child.exitCode}`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1_000) });
        await res.arrayBuffer();
        if (res.status === 200) return performance.now() - started;
      } catch {
        // not listening yet
      }
      await sleep(HEALTH_POLL_MS);
    }
    throw new Error('node server.js did not answer /healthz within 30 s');
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

async function main(): Promise<boolean> {
  const benchStarted = performance.now();
  process.env.PREVIEW_WORK_DIR = join(dataDir, 'work'); // removed with the data dir
  service = await startLocal({ dataDir, gitRoot, port: 0 });
  const files = { 'server.js': SERVER_JS, VERSION: 'v1' };
  const trivialSha = makeRepo(gitRoot, 'acme/shop', { ...files, 'preview.yaml': appYaml() });
  const shortSha = makeRepo(gitRoot, 'acme/build-short', {
    ...files,
    'preview.yaml': appYaml(sleepBuild(SHORT_BUILD_MS)),
  });
  const longSha = makeRepo(gitRoot, 'acme/build-long', {
    ...files,
    'preview.yaml': appYaml(sleepBuild(LONG_BUILD_MS)),
  });
  // A deploy needs the repository linked to an application of the caller's organization.
  for (const repo of ['acme/shop', 'acme/build-short', 'acme/build-long'])
    await linkRepo(service.credentials, repo);

  // (a) POST → ready. PR 1 warms up (module loading, first dynalite writes); PRs 2..11 are measured.
  const warmup = await deploy('acme/shop', 1, trivialSha);
  const deploys: number[] = [];
  for (let pr = 2; pr < 2 + RUNS; pr++) deploys.push(await deploy('acme/shop', pr, trivialSha));
  await service.workflows.idle();

  // (b) The app on its own, from the same files.
  await appStart(join(gitRoot, 'acme', 'shop')); // warm-up, not counted
  const starts: number[] = [];
  for (let i = 0; i < RUNS; i++) starts.push(await appStart(join(gitRoot, 'acme', 'shop')));

  // (c) Transitions at a short and a long build.
  const shortWall = await deploy('acme/build-short', 1, shortSha);
  const shortExec = await deployExecution('acme/build-short', 1);
  const longWall = await deploy('acme/build-long', 1, longSha);
  const longExec = await deployExecution('acme/build-long', 1);

  const overhead = median(deploys) - median(starts);
  const overheadOk = overhead < OVERHEAD_TARGET_MS;
  const transitionsOk = shortExec.transitions === longExec.transitions && shortExec.transitions > 0;

  const row = (label: string, ...cells: string[]) =>
    console.log(`${label.padEnd(44)} ${cells.map((c) => c.padStart(10)).join(' ')}`);
  console.log(
    `\n(a) POST → ready, trivial app (no build), ${RUNS} deploys to new PRs, polled every ${STATUS_POLL_MS} ms`,
  );
  row('', 'median', 'min', 'max');
  row('POST → ready', ms(median(deploys)), ms(Math.min(...deploys)), ms(Math.max(...deploys)));
  console.log(
    `  (warm-up deploy, not counted: ${ms(warmup)}; runs: ${deploys.map((d) => d.toFixed(0)).join(', ')})`,
  );

  console.log(
    `\n(b) the app alone: node server.js until /healthz answers 200, ${RUNS} starts, polled every ${HEALTH_POLL_MS} ms`,
  );
  row('', 'median', 'min', 'max');
  row('app start', ms(median(starts)), ms(Math.min(...starts)), ms(Math.max(...starts)));
  row('pipeline overhead (median − median)', ms(overhead), `< ${OVERHEAD_TARGET_MS} ms`, verdict(overheadOk));

  console.log(
    '\n(c) state transitions per successful deploy (states entered + retries, as Step Functions bills)',
  );
  row('', 'build', 'POST→ready', 'execution', 'states');
  const exec = (e: ExecutionRecord) => ms(e.endedAt! - e.startedAt);
  row('short build', ms(SHORT_BUILD_MS), ms(shortWall), exec(shortExec), String(shortExec.transitions));
  row('long build', ms(LONG_BUILD_MS), ms(longWall), exec(longExec), String(longExec.transitions));
  row(
    'short = long (target: equal)',
    '',
    '',
    `${shortExec.transitions} vs ${longExec.transitions}`,
    verdict(transitionsOk),
  );

  console.log(
    `\n${overheadOk && transitionsOk ? 'PASS' : 'FAIL'}: overhead ${verdict(overheadOk)}, ` +
      `transitions ${verdict(transitionsOk)} (bench took ${((performance.now() - benchStarted) / 1000).toFixed(1)} s)`,
  );
  return overheadOk && transitionsOk;
}

await runBench(main, async () => {
  await service?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
});
