/**
 * `npm run bench:secrets`: single-key secret upserts against the local server (the same handlers, dynalite
 * and encrypted secret files `npm start` runs), over real HTTP.
 *
 *  (a) 100 concurrent single-key upserts (distinct keys) to one fresh bundle, wall time from the first
 *      request to the last answer; ROUNDS rounds, each to its own bundle, median reported. Then every key
 *      is checked: each PUT answered 200, the listing (GET) names every key, and the stored values hold
 *      every key with the value sent. Target: ≤ 1.5 s (absolute) and none lost.
 *  (b) SEQUENTIAL single-key upserts to one bundle, one after the other: upserts per second.
 *      Target: ≥ 100/s (absolute).
 *
 * Both are also given as ratios against a baseline measured in the same run on the same server, so the
 * machine's noise cancels: the same number of secret listings of the same bundle (the same route stack:
 * authentication, the application's tenancy check and one DynamoDB read), 100 at once for (a) and one
 * after the other for (b). The targets themselves are absolute.
 *
 * Exit code 0 when every target is met, 1 otherwise.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApplication } from '../../functions/core/applications/applications.js';
import { LocalSecretStore } from '../../functions/ports/secret-store/local-files.js';
import { setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call } from '../support/api.js';
import { median, reportFigure, runBench } from './report.js';

const CONCURRENT = 100;
const ROUNDS = 5;
const SEQUENTIAL = Number(process.env.BENCH_SECRETS_SEQUENTIAL ?? 300);
const CONCURRENT_TARGET_S = 1.5;
const SEQUENTIAL_TARGET_PER_S = 100;

setLogSink(() => {}); // the service's own log lines would drown the table
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-secrets-'));
let service: LocalService | undefined;

const keyName = (i: number) => `BENCH_KEY_${String(i).padStart(3, '0')}`;
const valueFor = (bundle: string, key: string) => `value of ${key} in ${bundle}: ${'s'.repeat(24)}`;

async function main(): Promise<boolean> {
  const started = performance.now();
  process.env.PREVIEW_WORK_DIR = join(dataDir, 'work'); // removed with the data dir
  service = await startLocal({ dataDir, port: 0 });
  const org = service.credentials;
  const auth = bearer(org);
  const { applicationId } = await createApplication({ orgId: org.orgId, repoFullName: 'bench/secrets' });
  const store = new LocalSecretStore(dataDir);
  const bundlePath = (app: string) => `/v1/preview/secrets/${applicationId}/${app}`;

  const put = async (app: string, key: string) => {
    const res = await call(service!, 'PUT', `${bundlePath(app)}/${key}`, {
      body: { value: valueFor(app, key) },
      headers: auth,
    });
    return res.status;
  };
  const list = async (app: string) => {
    const res = await call<{ keys: { key: string }[] }>(service!, 'GET', bundlePath(app), { headers: auth });
    if (res.status !== 200) throw new Error(`GET ${bundlePath(app)} answered ${res.status}: ${res.text}`);
    return res.body.keys.map((k) => k.key);
  };
  const wall = async (work: () => Promise<unknown>) => {
    const t0 = performance.now();
    await work();
    return performance.now() - t0;
  };

  // Warm-up, not counted: module loading, the first dynalite writes, the first secret file.
  await Promise.all(Array.from({ length: 20 }, (_, i) => put('warmup', keyName(i))));
  for (let i = 0; i < 20; i++) await list('warmup');

  // (a) 100 at once, ROUNDS times, each round to a fresh bundle; the baseline (100 listings at once of
  // the same bundle) runs right before each round.
  const baselineWalls: number[] = [];
  const upsertWalls: number[] = [];
  let lost = 0;
  const lostDetail: string[] = [];
  let failedRequests = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const app = `bundle-${round}`;
    baselineWalls.push(await wall(() => Promise.all(Array.from({ length: CONCURRENT }, () => list(app)))));
    const keys = Array.from({ length: CONCURRENT }, (_, i) => keyName(i));
    let statuses: number[] = [];
    upsertWalls.push(await wall(async () => (statuses = await Promise.all(keys.map((k) => put(app, k))))));
    failedRequests += statuses.filter((s) => s !== 200).length;
    const listed = new Set(await list(app));
    const values = (await store.read({ applicationId, app })) ?? {};
    const missing = keys.filter((k) => !listed.has(k) || values[k] !== valueFor(app, k));
    lost += missing.length;
    if (missing.length)
      lostDetail.push(`${app}: ${missing.length} lost (${missing.slice(0, 3).join(', ')}…)`);
    if (listed.size !== CONCURRENT || Object.keys(values).length !== CONCURRENT) {
      lostDetail.push(`${app}: ${listed.size} listed, ${Object.keys(values).length} stored`);
    }
  }

  // (b) one after the other, to one bundle; the baseline is as many listings one after the other.
  const seqBaseline = await wall(async () => {
    for (let i = 0; i < SEQUENTIAL; i++) await list('sequential');
  });
  let seqFailed = 0;
  const seqWall = await wall(async () => {
    for (let i = 0; i < SEQUENTIAL; i++) if ((await put('sequential', keyName(i))) !== 200) seqFailed++;
  });
  const seqValues = (await store.read({ applicationId, app: 'sequential' })) ?? {};
  const seqLost = Array.from({ length: SEQUENTIAL }, (_, i) => keyName(i)).filter(
    (k) => seqValues[k] !== valueFor('sequential', k),
  ).length;

  const concurrentS = median(upsertWalls) / 1000;
  const concurrentRatio = median(upsertWalls) / median(baselineWalls);
  const perSecond = SEQUENTIAL / (seqWall / 1000);
  const baselinePerSecond = SEQUENTIAL / (seqBaseline / 1000);
  const ms = (n: number) => `${n.toFixed(0)} ms`;

  console.log(`\n(a) ${CONCURRENT} concurrent single-key upserts to one fresh bundle, ${ROUNDS} rounds`);
  console.log(`  upserts:   ${upsertWalls.map(ms).join(', ')}  (median ${ms(median(upsertWalls))})`);
  console.log(
    `  baseline:  ${baselineWalls.map(ms).join(', ')}  (median ${ms(median(baselineWalls))}, ${CONCURRENT} listings at once)`,
  );
  console.log(`  ratio upserts / listings: ${concurrentRatio.toFixed(2)}×`);
  console.log(
    `  non-200 answers: ${failedRequests}; keys lost: ${lost}${lostDetail.length ? ` (${lostDetail.join('; ')})` : ''}`,
  );
  console.log(`\n(b) ${SEQUENTIAL} sequential single-key upserts to one bundle`);
  console.log(
    `  upserts:  ${perSecond.toFixed(0)}/s (${ms(seqWall)}); listings: ${baselinePerSecond.toFixed(0)}/s (${ms(seqBaseline)}); ` +
      `ratio ${(perSecond / baselinePerSecond).toFixed(2)}×; non-200: ${seqFailed}; lost: ${seqLost}`,
  );

  const concurrentOk = concurrentS <= CONCURRENT_TARGET_S;
  const noneLostOk = lost + failedRequests + seqLost + seqFailed === 0;
  const sequentialOk = perSecond >= SEQUENTIAL_TARGET_PER_S;
  reportFigure({
    name: `${CONCURRENT} concurrent single-key upserts to one bundle (absolute)`,
    measured: Number(concurrentS.toFixed(3)),
    target: `≤ ${CONCURRENT_TARGET_S} s`,
    ok: concurrentOk,
    unit: 's',
    detail:
      `median of ${ROUNDS} rounds (${upsertWalls.map(ms).join(', ')}); ${concurrentRatio.toFixed(2)}× the wall time of ` +
      `${CONCURRENT} concurrent listings of the same bundle (median ${ms(median(baselineWalls))})`,
  });
  reportFigure({
    name: 'secret upserts lost or refused',
    measured: lost + failedRequests + seqLost + seqFailed,
    target: '= 0',
    ok: noneLostOk,
    unit: 'keys',
    detail:
      `${ROUNDS}×${CONCURRENT} concurrent + ${SEQUENTIAL} sequential upserts: ${failedRequests + seqFailed} non-200, ` +
      `${lost + seqLost} missing from the listing or the stored values`,
  });
  reportFigure({
    name: 'sequential single-key upserts to one bundle (absolute)',
    measured: Number(perSecond.toFixed(1)),
    target: `≥ ${SEQUENTIAL_TARGET_PER_S} /s`,
    ok: sequentialOk,
    unit: '/s',
    detail:
      `${SEQUENTIAL} upserts in ${ms(seqWall)}; ${(perSecond / baselinePerSecond).toFixed(2)}× the rate of ` +
      `sequential listings of the same bundle (${baselinePerSecond.toFixed(0)}/s)`,
  });
  console.log(`\n(bench took ${((performance.now() - started) / 1000).toFixed(1)} s)`);
  return concurrentOk && noneLostOk && sequentialOk;
}

await runBench(main, async () => {
  await service?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});
