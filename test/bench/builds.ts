/**
 * `npm run bench:builds`: what build identity saves (docs/builds.md), measured against the local
 * server (the same handlers and ASL state machines as in AWS, apps built and run as local processes).
 *
 * A two-app repository (`web`, a 1 s build; `api`, a 3 s build: a light front end beside a heavy back
 * end), deployed once (unmeasured warm-up, both built). Then ROUNDS rounds, each two pushes deployed to
 * new pull requests: a commit touching only `web/` (the measured case), and a commit touching both apps
 * (the baseline, measured in the same run: a build of both). For each: builds run (apps whose status
 * `builds` says `built`), and POST → `ready`. Targets: a one-app push runs 1 build; its time to ready is
 * below the baseline's (a ratio against the baseline, this machine being shared and noisy).
 *
 * Exit code 0 when both targets are met, 1 otherwise.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { statusPath } from '../../functions/core/environments/lifecycle.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call, linkRepo } from '../support/api.js';
import { SERVER_JS, type Status } from '../support/apps.js';
import { commitFiles, makeRepo } from '../support/git.js';
import { median, reportFigure, runBench } from './report.js';

const ROUNDS = 3;
const REPO = 'bench/two';
const STATUS_POLL_MS = 20;
const sleepBuild = (app: string, ms: number) =>
  `node -e "setTimeout(()=>require('fs').writeFileSync('stamp-${app}',String(Math.random())),${ms})"`;
const YAML = [
  'apps:',
  '  web:',
  '    port: 3000',
  '    context: web',
  `    build: ${JSON.stringify(sleepBuild('web', 1_000))}`,
  '    command: node server.js web',
  '    health: /healthz',
  '  api:',
  '    port: 3001',
  '    context: api',
  `    build: ${JSON.stringify(sleepBuild('api', 3_000))}`,
  '    command: node server.js api',
  '    health: /healthz',
  '',
].join('\n');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
setLogSink(() => {});
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-data-'));
const gitRoot = mkdtempSync(join(tmpdir(), 'preview-bench-git-'));
const workDirVar = process.env.PREVIEW_WORK_DIR;
process.env.PREVIEW_WORK_DIR = join(dataDir, 'work');
let service: LocalService | undefined;

type WithBuilds = Status & { builds?: Record<string, { result: string; commit: string }> };

/** POST a deploy, poll until ready; wall time and the apps built. */
async function deploy(prNumber: number, headSha: string): Promise<{ ms: number; built: string[] }> {
  const auth = bearer(service!.credentials);
  const path = statusPath(REPO, prNumber);
  const started = performance.now();
  const res = await call(service!, 'POST', '/v1/preview/environments', {
    body: { repoFullName: REPO, prNumber, headSha, headRef: `f${prNumber}` },
    headers: auth,
  });
  if (res.status !== 202) throw new Error(`POST #${prNumber} answered ${res.status}: ${res.text}`);
  while (performance.now() - started < 90_000) {
    const s = await call<WithBuilds>(service!, 'GET', path, { headers: auth });
    if (s.body.status === 'ready') {
      const ms = performance.now() - started;
      const built = Object.entries(s.body.builds ?? {}).flatMap(([app, b]) =>
        b.result === 'built' ? [app] : [],
      );
      return { ms, built: built.sort() };
    }
    if (s.body.status === 'failed') throw new Error(`#${prNumber} failed: ${s.body.error}`);
    await sleep(STATUS_POLL_MS);
  }
  throw new Error(`#${prNumber} was not ready within 90 s`);
}

async function main(): Promise<boolean> {
  service = await startLocal({ dataDir, port: 0, gitRoot });
  const first = makeRepo(gitRoot, REPO, {
    'preview.yaml': YAML,
    'server.js': SERVER_JS,
    VERSION: 'bench',
    'web/index.txt': 'web 0\n',
    'api/main.txt': 'api 0\n',
  });
  await linkRepo(service.credentials, REPO);
  const warm = await deploy(1, first);
  console.log(`warm-up (PR 1): built ${warm.built.join(', ')} in ${warm.ms.toFixed(0)} ms`);
  const one: { ms: number; built: string[] }[] = [];
  const both: { ms: number; built: string[] }[] = [];
  let pr = 2;
  for (let round = 1; round <= ROUNDS; round++) {
    const webOnly = commitFiles(gitRoot, REPO, { 'web/index.txt': `web ${round}\n` });
    one.push(await deploy(pr++, webOnly));
    const changedBoth = commitFiles(gitRoot, REPO, {
      'web/index.txt': `web ${round} both\n`,
      'api/main.txt': `api ${round}\n`,
    });
    both.push(await deploy(pr++, changedBoth));
    console.log(
      `round ${round}: web only → built ${one.at(-1)!.built.join(', ') || 'nothing'} in ${one.at(-1)!.ms.toFixed(0)} ms; ` +
        `both → built ${both.at(-1)!.built.join(', ')} in ${both.at(-1)!.ms.toFixed(0)} ms`,
    );
  }
  const buildsOne = median(one.map((r) => r.built.length));
  const buildsBoth = median(both.map((r) => r.built.length));
  const msOne = median(one.map((r) => r.ms));
  const msBoth = median(both.map((r) => r.ms));
  const ratio = msOne / msBoth;
  console.log('');
  console.log(
    `push touching web/ only:  ${buildsOne} build(s) per push, median ${msOne.toFixed(0)} ms to ready`,
  );
  console.log(
    `push touching both apps:  ${buildsBoth} build(s) per push, median ${msBoth.toFixed(0)} ms to ready`,
  );
  console.log(`time to ready, one app vs both: ${ratio.toFixed(2)}×`);
  const buildsOk = buildsOne === 1 && buildsBoth === 2;
  reportFigure({
    name: 'builds per push touching one of two apps',
    measured: buildsOne,
    target: '= 1 (a push touching both: 2)',
    ok: buildsOk,
    unit: 'builds',
    detail: `${buildsOne} vs ${buildsBoth} builds`,
  });
  reportFigure({
    name: 'time to ready, one app changed / both changed',
    measured: Number(ratio.toFixed(2)),
    target: '< 1×',
    ok: ratio < 1,
    unit: '×',
    detail: `${msOne.toFixed(0)} vs ${msBoth.toFixed(0)} ms (median of ${ROUNDS})`,
  });
  return buildsOk && ratio < 1;
}

await runBench(main, async () => {
  await service?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(gitRoot, { recursive: true, force: true });
  if (workDirVar === undefined) delete process.env.PREVIEW_WORK_DIR;
  else process.env.PREVIEW_WORK_DIR = workDirVar;
});
