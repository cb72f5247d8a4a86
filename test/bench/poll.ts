/**
 * `npm run bench:poll`: read throughput of the local server against a bare one-GetItem server, measured
 * side by side in one run. This machine is shared and noisy, so every figure is a
 * ratio against the bare server measured in the same run, in alternating rounds.
 *
 * Every server lives in this process and reads the same dynalite through the same DynamoDB client
 * (functions/shared/aws/dynamo.ts `ddb()`, the SDK's `DynamoDBDocumentClient`), so the SDK's cost is on both
 * sides of every ratio:
 *  - bare: `node:http`, one `GetItem` of the environment item per request, the item as JSON;
 *  - status poll: GET /v1/preview/environments/{owner}/{repo}/{pr} (an environment of the org);
 *  - secrets listing: GET /v1/preview/secrets/{applicationId}/{app} (a bundle of 5 keys);
 *  - runs listing: GET /run (a page of 20 runs, the default);
 *  - bare page: `node:http`, the one Query GET /run makes for that page (21 entries of the org's page
 *    index), the items as JSON: the like-for-like baseline of GET /run.
 * The load comes from autocannon in a child process (10 connections, BENCH_POLL_SECONDS each, default 5),
 * so it does not share this process's CPU. Each round measures bare, poll, bare, secrets, bare, bare page,
 * runs, bare, bare page: every route sits between two bare measurements, and its ratio in that round is its req/s over the
 * mean of those two (so the load of this shared machine, which drifts over seconds, falls on both sides).
 * The figure is the median of the rounds' ratios (BENCH_POLL_ROUNDS rounds, default 5, after one
 * unmeasured warm-up of each). Every response must be a 200, or the figure fails.
 *
 * Beside req/s, each line gives the CPU time this process spent per request (server and dynalite, which
 * live here; the load generator does not): on a loaded machine req/s swings with what else runs, CPU per
 * request much less, so `bare CPU / route CPU` is printed beside each ratio as a steadier estimate of it.
 *
 * The service's log lines are written as `npm start` writes them (JSON.stringify per request, the lines of
 * each event-loop turn in one write: `batchedSink`) to /dev/null, so their cost is measured without
 * flooding this output.
 *
 * `BENCH_POLL_ONLY=<bare|bareQuery|poll|secrets|runs|pollOff|secretsOff|runsOff>` runs that one load for BENCH_POLL_SECONDS and exits
 * without figures: a profiler's view of one path.
 *
 * Each route is measured twice per round: with the fair share's request limiter on (the limit of
 * test/support/env.ts, far above this load: every request is counted, none refused) and off (`…Off`,
 * the limit set to 0 for that measurement), so what the limiter costs is in the same run.
 *
 * Targets, limiter on: status poll ≥ 0.75×, secrets listing ≥ 0.6× and GET /run ≥ 0.4× of the bare
 * GetItem server, and GET /run ≥ 0.8× of the bare page server; the limiter-off figures are printed
 * beside them, not counted. Exit 1 when one is missed.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { GetCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { createApplication } from '../../functions/core/applications/applications.js';
import type { Environment } from '../../functions/core/environments/lifecycle.js';
import type { RunItem } from '../../functions/core/runs/store.js';
import { keys } from '../../functions/manifest/tables.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { config } from '../../functions/shared/config.js';
import { batchedSink, setLogSink } from '../../functions/shared/log.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call, client } from '../support/api.js';
import { median, reportFigure } from './report.js';

const SECONDS = Number(process.env.BENCH_POLL_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_POLL_ROUNDS ?? 5);
const CONNECTIONS = 10;
const AUTOCANNON = resolve(new URL('../../node_modules/autocannon/autocannon.js', import.meta.url).pathname);

type Route = 'poll' | 'secrets' | 'runs';
interface Load {
  url: string;
  headers: Record<string, string>;
}
interface Sample {
  rps: number;
  p50: number;
  /** CPU time this process (server and dynalite) spent per request, µs: steadier than req/s under load. */
  cpuUs: number;
  non2xx: number;
  errors: number;
}

/** autocannon against one URL, in a child process; its JSON summary. */
function cannon(load: Load, seconds: number): Promise<Sample> {
  const args = [AUTOCANNON, '-c', String(CONNECTIONS), '-d', String(seconds), '--json', '-n'];
  for (const [k, v] of Object.entries(load.headers)) args.push('-H', `${k}=${v}`);
  args.push(load.url);
  return new Promise((ok, fail) => {
    const cpu = process.cpuUsage();
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c;
    });
    child.once('error', fail);
    child.once('exit', (code) => {
      if (code !== 0) return fail(new Error(`autocannon exited ${code}: ${err.slice(-500)}`));
      const r = JSON.parse(out) as {
        requests: { average: number; total: number };
        latency: { p50: number };
        non2xx: number;
        errors: number;
        timeouts: number;
      };
      const used = process.cpuUsage(cpu);
      ok({
        rps: r.requests.average,
        p50: r.latency.p50,
        cpuUs: (used.user + used.system) / Math.max(1, r.requests.total),
        non2xx: r.non2xx,
        errors: r.errors + r.timeouts,
      });
    });
  });
}

const logFd = openSync('/dev/null', 'w');
setLogSink(batchedSink((text) => writeSync(logFd, text)));
const dataDir = mkdtempSync(join(tmpdir(), 'preview-bench-poll-'));
let service: LocalService | undefined;
let bare: Server | undefined;
let bareQuery: Server | undefined;

try {
  service = await startLocal({ dataDir, port: 0 });
  const org = service.credentials;
  const now = new Date().toISOString();

  // An environment of the org, as a deploy leaves it.
  const repoFullName = 'bench/poll';
  const prNumber = 7;
  const envKey = keys.environments.envKey(repoFullName, prNumber);
  const env: Environment = {
    orgId: org.orgId,
    envKey,
    repoFullName,
    prNumber,
    status: 'ready',
    phase: 'ready',
    createdAt: now,
    updatedAt: now,
    lastDeployedSha: 'a'.repeat(40),
    urls: { web: 'http://127.0.0.1:41000' },
    generation: 1,
    environmentId: 'benchenvironment0001',
    lastDeployAt: now,
    // What DeployApps records: the access the apps run with (a public preview, the local default).
    access: 'public',
  };
  await ddb().send(new PutCommand({ TableName: table('environments'), Item: env }));

  // An application with a bundle of 5 secrets, through the API.
  const { applicationId } = await createApplication({ orgId: org.orgId, repoFullName });
  const secretsPath = `/v1/preview/secrets/${applicationId}/web`;
  const put = await call(service, 'PUT', secretsPath, {
    headers: bearer(org),
    body: { items: [1, 2, 3, 4, 5].map((i) => ({ key: `KEY_${i}`, value: `value-${i}-${'x'.repeat(20)}` })) },
  });
  if (put.status !== 200) throw new Error(`PUT secrets answered ${put.status}: ${put.text}`);

  // 20 finished runs of one test (GET /run's default page).
  for (let i = 0; i < 20; i++) {
    const runId = `benchrun${String(i).padStart(4, '0')}`;
    const createdAt = new Date(Date.now() - (20 - i) * 1000).toISOString();
    const run: RunItem = {
      runId,
      orgId: org.orgId,
      testId: 'benchtest0001',
      name: 'sign up',
      status: 'passed',
      createdAt,
      startedAt: createdAt,
      endedAt: createdAt,
      folder: { id: 'benchfolder0001', name: 'bench' },
      source: 'api',
      variables: {},
      steps: [],
      ...keys.runs.indexKeys({
        orgId: org.orgId,
        runId,
        testId: 'benchtest0001',
        folderId: 'benchfolder0001',
        status: 'passed',
        createdAt,
      }),
    };
    await ddb().send(new PutCommand({ TableName: table('runs'), Item: run }));
  }

  // The bare server: one GetItem of the same item through the same client, per request.
  bare = createServer(async (_req, res) => {
    try {
      const { Item } = await ddb().send(
        new GetCommand({
          TableName: table('environments'),
          Key: { orgId: org.orgId, envKey },
          ConsistentRead: true,
        }),
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify(Item)}\n`);
    } catch {
      res.writeHead(500).end();
    }
  });
  await new Promise<void>((ok) => bare!.listen(0, '127.0.0.1', ok));
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;

  // The bare page server: the Query GET /run makes for its default page (21 entries of the org's page
  // index, newest first), through the same client, answered as JSON: what a page costs without the API.
  bareQuery = createServer(async (_req, res) => {
    try {
      const { Items } = await ddb().send(
        new QueryCommand({
          TableName: table('runs'),
          IndexName: 'pageOrg',
          KeyConditionExpression: '#k = :k',
          ExpressionAttributeNames: { '#k': 'orgId' },
          ExpressionAttributeValues: { ':k': org.orgId },
          ScanIndexForward: false,
          Limit: 21,
        }),
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify(Items)}\n`);
    } catch {
      res.writeHead(500).end();
    }
  });
  await new Promise<void>((ok) => bareQuery!.listen(0, '127.0.0.1', ok));
  const bareQueryUrl = `http://127.0.0.1:${(bareQuery.address() as AddressInfo).port}/`;

  const routeLoads = {
    poll: { url: `${service.url}/v1/preview/environments/${repoFullName}/${prNumber}`, headers: bearer(org) },
    secrets: { url: `${service.url}${secretsPath}`, headers: bearer(org) },
    runs: { url: `${service.url}/run`, headers: client(org) },
  };
  // Each route twice: with the fair share's request limiter on (its limit, test/support/env.ts, far above
  // what this load reaches: it counts every request and refuses none) and off (limit 0, as `measure` sets
  // it for the `…Off` loads), so the limiter's cost is measured in the same run.
  const loads: Record<'bare' | 'bareQuery' | Route | `${Route}Off`, Load> = {
    bare: { url: bareUrl, headers: {} },
    bareQuery: { url: bareQueryUrl, headers: {} },
    ...routeLoads,
    pollOff: routeLoads.poll,
    secretsOff: routeLoads.secrets,
    runsOff: routeLoads.runs,
  };
  const limit = config().fairShare.requestsPerSecond;
  if (limit <= 0) throw new Error('the request limiter is off: set PREVIEW_ORG_REQUESTS_PER_SECOND');
  // Each answers 200 with a real body before it is measured.
  for (const [name, load] of Object.entries(loads)) {
    const res = await fetch(load.url, { headers: load.headers });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${name}: ${res.status} ${text}`);
    console.log(`${name}: 200, ${text.length} bytes: ${text.slice(0, 120).trim()}…`);
  }
  const runsBody = (await (await fetch(loads.runs.url, { headers: loads.runs.headers })).json()) as unknown[];
  if (runsBody.length !== 20) throw new Error(`GET /run listed ${runsBody.length} runs, not 20`);

  // BENCH_POLL_ONLY=<load>: that load alone for BENCH_POLL_SECONDS, no figures (for a profiler:
  // `BENCH_POLL_ONLY=runs node --cpu-prof --import tsx test/bench/poll.ts`).
  const only = process.env.BENCH_POLL_ONLY as keyof typeof loads | undefined;
  if (only) {
    if (!loads[only]) throw new Error(`BENCH_POLL_ONLY: one of ${Object.keys(loads).join(', ')}`);
    config().fairShare.requestsPerSecond = only.endsWith('Off') ? 0 : limit;
    await cannon(loads[only], 2); // warm-up, as below
    const s = await cannon(loads[only], SECONDS);
    console.log(`${only} ${s.rps.toFixed(0)} req/s  p50 ${s.p50} ms  ${s.cpuUs.toFixed(0)} µs CPU/request`);
  } else {
    console.log(`warm-up: 2 s each`);
    for (const load of Object.values(loads)) await cannon(load, 2);

    type Measured = Exclude<keyof typeof loads, 'bare' | 'bareQuery'>;
    const routeNames: Measured[] = ['poll', 'pollOff', 'secrets', 'secretsOff', 'runs', 'runsOff'];
    const samples = Object.fromEntries(Object.keys(loads).map((k) => [k, []])) as unknown as Record<
      keyof typeof loads,
      Sample[]
    >;
    /** Per route, per round: its req/s and CPU per request over the mean of the bare runs either side. */
    const ratios = Object.fromEntries(routeNames.map((k) => [k, []])) as unknown as Record<
      Measured,
      { rps: number; cpu: number }[]
    >;
    /** Per round: GET /run against the bare page server, measured on either side of it. */
    const pageRatios: { rps: number; cpu: number }[] = [];
    const measure = async (round: number, name: keyof typeof loads) => {
      config().fairShare.requestsPerSecond = name.endsWith('Off') ? 0 : limit;
      const s = await cannon(loads[name], SECONDS).finally(() => {
        config().fairShare.requestsPerSecond = limit;
      });
      samples[name].push(s);
      console.log(
        `round ${round} ${name.padEnd(8)} ${s.rps.toFixed(0).padStart(6)} req/s  p50 ${s.p50} ms  ` +
          `${s.cpuUs.toFixed(0)} µs CPU/request` +
          (s.non2xx || s.errors ? `  (${s.non2xx} non-2xx, ${s.errors} errors)` : ''),
      );
      return s;
    };
    for (let round = 1; round <= ROUNDS; round++) {
      let before = await measure(round, 'bare');
      for (const name of routeNames) {
        const query = name === 'runs' ? await measure(round, 'bareQuery') : undefined;
        // (GET /run with the limiter off is held to the GetItem server only.)
        const s = await measure(round, name);
        const after = await measure(round, 'bare');
        ratios[name].push({
          rps: s.rps / ((before.rps + after.rps) / 2),
          cpu: (before.cpuUs + after.cpuUs) / 2 / s.cpuUs,
        });
        if (query) {
          const queryAfter = await measure(round, 'bareQuery');
          pageRatios.push({
            rps: s.rps / ((query.rps + queryAfter.rps) / 2),
            cpu: (query.cpuUs + queryAfter.cpuUs) / 2 / s.cpuUs,
          });
        }
        before = after;
      }
    }

    const rps = (name: keyof typeof loads) => median(samples[name].map((s) => s.rps));
    const p50 = (name: keyof typeof loads) => median(samples[name].map((s) => s.p50));
    const cpu = (name: keyof typeof loads) => median(samples[name].map((s) => s.cpuUs));
    const failures = (name: keyof typeof loads): number =>
      (samples[name] ?? []).reduce((n, s) => n + s.non2xx + s.errors, 0) +
      (name === 'bare' ? 0 : failures('bare'));
    // [route, label, target, counted]: the limiter on is held to the targets; off, printed beside it.
    const figures: [Measured, string, number, boolean][] = [
      ['poll', 'status poll / bare GetItem server, limiter on', 0.75, true],
      ['pollOff', 'status poll / bare GetItem server, limiter off (informational)', 0.75, false],
      ['secrets', 'secrets listing / bare GetItem server, limiter on', 0.6, true],
      ['secretsOff', 'secrets listing / bare GetItem server, limiter off (informational)', 0.6, false],
      ['runs', 'GET /run / bare GetItem server, limiter on', 0.4, true],
      ['runsOff', 'GET /run / bare GetItem server, limiter off (informational)', 0.4, false],
    ];
    let allOk = true;
    for (const [name, label, target, counted] of figures) {
      const ratio = median(ratios[name].map((r) => r.rps));
      const cpuRatio = median(ratios[name].map((r) => r.cpu));
      const bad = failures(name);
      const ok = ratio >= target && bad === 0;
      if (counted) allOk &&= ok;
      reportFigure({
        name: label,
        measured: Math.round(ratio * 100) / 100,
        target: `≥ ${target}×`,
        ok,
        unit: '×',
        detail:
          `req/s ratio per round ${ratios[name].map((r) => r.rps.toFixed(2)).join(' ')}; ` +
          `medians ${rps(name).toFixed(0)} vs ${rps('bare').toFixed(0)} req/s, p50 ${p50(name)} vs ${p50('bare')} ms; ` +
          `CPU ${cpu(name).toFixed(0)} vs ${cpu('bare').toFixed(0)} µs/request (bare/route CPU, paired: ` +
          `${cpuRatio.toFixed(2)}×); ${ROUNDS} rounds × ${SECONDS} s, ${CONNECTIONS} connections` +
          (bad ? `; ${bad} non-2xx or failed responses` : ''),
        ...(counted ? {} : { informational: true as const }),
      });
    }
    // GET /run's target: what it costs over the Query it makes, the like-for-like comparison
    // (the GetItem baseline reads one item; a page is 21).
    const pageRatio = median(pageRatios.map((r) => r.rps));
    const pageOk = pageRatio >= 0.8 && failures('runs') === 0;
    allOk &&= pageOk;
    reportFigure({
      name: 'GET /run / bare page Query server',
      measured: Math.round(pageRatio * 100) / 100,
      target: '≥ 0.8×',
      ok: pageOk,
      unit: '×',
      detail:
        `req/s ratio per round ${pageRatios.map((r) => r.rps.toFixed(2)).join(' ')}; ` +
        `medians ${rps('runs').toFixed(0)} vs ${rps('bareQuery').toFixed(0)} req/s (the bare page Query itself: ` +
        `${(rps('bareQuery') / rps('bare')).toFixed(2)}× the bare GetItem); CPU ${cpu('runs').toFixed(0)} vs ` +
        `${cpu('bareQuery').toFixed(0)} µs/request (paired: ${median(pageRatios.map((r) => r.cpu)).toFixed(2)}×)`,
    });
    process.exitCode = allOk ? 0 : 1;
  }
} finally {
  if (bare) await new Promise<void>((done) => bare!.close(() => done()));
  if (bareQuery) await new Promise<void>((done) => bareQuery!.close(() => done()));
  await service?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  closeSync(logFd);
}
