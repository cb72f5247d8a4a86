import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { createApplication, type OrgCredentials } from '../../functions/core/applications/applications.js';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import { type RouteId, routeIds } from '../../functions/manifest/routes.js';
import { bearer, call, client } from '../support/api.js';
import { localServerForFile } from '../support/local-server.js';
import { isErrorBody, type RawResponse, rawRequest } from '../support/raw-http.js';
import { closeSnapshots, snapshot, stableJson } from '../support/stored-state.js';
import {
  type Case,
  caseOf,
  effectiveRoute,
  head,
  type Orgs,
  type Owned,
  type Ownership,
  refusal,
  requestOf,
  STORED_KEYS,
} from './cases.js';
import { validRecipesFile } from './route-bodies.js';

/*
 * The hardening regression tier: property-based probing of every route of the manifest over
 * real HTTP against the local server, as an outsider would. Each generated request must be refused: it has
 * no valid credentials, a malformed Host, a malformed HTTP message, a path parameter or a body its route
 * rejects, or names another organization's (or no) object. For every one:
 * - never a 5xx; every 4xx is exactly `{"error": string}` (JSON);
 * - the status the refusal calls for (401 without valid credentials, 400 for a malformed Host, …);
 * - nothing stored changed: every table and the secret files are as before.
 *
 * The hostile values are in `hostile-values.ts`, the bodies of each route in `route-bodies.ts`, and what a
 * case is, the request it becomes and why it must be refused in `cases.ts`.
 *
 * FUZZ_RUNS sets the cases per route (default 100), FUZZ_SEED replays a run, FUZZ_REPORT names a file for
 * the counts of answers by status per route (they are also printed).
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 100);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

const h = localServerForFile();
let orgs: Orgs;
let owned: Ownership;
let baseline: Record<string, string[]>;
const counts = new Map<RouteId, Map<number, number>>();

const testFile = (name: string) => [
  {
    name,
    folder: { id: 'fuzz-folder', name: 'Fuzz' },
    application_version: { name: 'v1', path: '/v1' },
    variables: { EMAIL: 'e', constructor: 'c' },
    steps: [{ instruction: 'i', interaction: 'click', url: 'u', element: { html: '<b>', selector: 'b' } }],
  },
];

async function seed(org: OrgCredentials, repoFullName: string, setupId: string): Promise<Owned> {
  const { applicationId } = await createApplication({ orgId: org.orgId, repoFullName });
  const testId = (await importTests(org.orgId, testFile(`test of ${org.orgId}`))).tests[0]!.id;
  const run = await call(h, 'POST', `/test/${testId}/run`, {
    headers: client(org),
    body: { source: 'seed' },
  });
  const recipe = await call(h, 'POST', `/v1/setup/setups/${setupId}/scenario-recipe-versions`, {
    headers: bearer(org),
    body: validRecipesFile(),
  });
  expect([run.status, recipe.status]).toEqual([201, 201]);
  return { applicationId, testId, runId: run.body.run_id, setupId };
}

beforeAll(async () => {
  orgs = { a: h.org, b: await h.newOrg('fuzz-b') };
  owned = { a: await seed(orgs.a, 'acme/fuzz', 'setup-a'), b: await seed(orgs.b, 'other/fuzz', 'setup-b') };
  const bundle = await call(h, 'PUT', `/v1/preview/secrets/${owned.a.applicationId}/web`, {
    headers: bearer(orgs.a),
    body: { items: STORED_KEYS.map((key) => ({ key, value: `value of ${key}` })) },
  });
  expect(bundle.status).toBe(200);
  baseline = await snapshot(h.dataDir);
}, 60_000);

afterAll(async () => {
  const table = Object.fromEntries(
    [...counts].map(([id, byStatus]) => [
      id,
      Object.fromEntries([...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => [s, n])),
    ]),
  );
  const totals = new Map<number, number>();
  for (const byStatus of counts.values())
    for (const [s, n] of byStatus) totals.set(s, (totals.get(s) ?? 0) + n);
  const report = {
    runsPerRoute: RUNS,
    byRoute: table,
    total: Object.fromEntries([...totals].sort(([a], [b]) => a - b)),
  };
  console.log(`fuzz: answers by status per route\n${JSON.stringify(report, null, 2)}`);
  if (process.env.FUZZ_REPORT) writeFileSync(process.env.FUZZ_REPORT, `${JSON.stringify(report, null, 2)}\n`);
  closeSnapshots();
});

/** What differs between two snapshots: items gone and items new, per table or folder. */
function changes(before: Record<string, string[]>, after: Record<string, string[]>): string {
  const out: Record<string, { gone: string[]; new: string[] }> = {};
  for (const where of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = new Set(before[where] ?? []);
    const a = new Set(after[where] ?? []);
    const gone = [...b].filter((x) => !a.has(x));
    const added = [...a].filter((x) => !b.has(x));
    if (gone.length || added.length) out[where] = { gone, new: added };
  }
  return JSON.stringify(out).slice(0, 2_000);
}

function record(id: RouteId, status: number) {
  const byStatus = counts.get(id) ?? new Map<number, number>();
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  counts.set(id, byStatus);
}

async function check(id: RouteId, c: Case): Promise<void> {
  const req = requestOf(id, c, orgs);
  const effective = c.mode === 'malformedHttp' ? undefined : effectiveRoute(req.method, req.target);
  // A dot segment may resolve to another route: only cases whose refusal is certain are sent.
  if (effective && effective.id !== id) fc.pre(false);
  const why = refusal(id, c, effective?.params ?? {}, owned);
  fc.pre(why !== undefined || !effective);
  const res: RawResponse = await rawRequest(h.url, req);
  record(id, res.status);
  const seen = { status: res.status, body: res.text.slice(0, 300), why, mode: c.mode };

  if (res.status >= 500) throw new Error(`5xx: ${JSON.stringify(seen)}`);
  if (res.status >= 400) {
    if (!isErrorBody(res.json) || res.headers['content-type'] !== 'application/json')
      throw new Error(`a 4xx that is not {"error": string}: ${JSON.stringify(seen)}`);
  }
  const tooBig = head(req) > 12_000 && res.status === 431;
  const routed = effective !== undefined;
  let expected: number[];
  if (why === 'malformed HTTP') expected = [400, 431];
  else if (why === 'host') expected = [400, 431];
  else if (!routed) expected = [404, 400, 431];
  else if (why === 'credentials') expected = [401];
  else if (why === 'read-only') expected = [200, 400, 401, 404, 413];
  else if (why === 'no environment exists' && id === 'teardownEnvironment')
    expected = [202, 400, 401, 404, 413];
  else expected = [400, 401, 404, 413];
  if (!tooBig && !expected.includes(res.status))
    throw new Error(`expected ${expected.join('/')}: ${JSON.stringify(seen)}`);

  const now = await snapshot(h.dataDir);
  if (stableJson(now) !== stableJson(baseline))
    throw new Error(`stored state changed after ${JSON.stringify(seen)}: ${changes(baseline, now)}`);
}

describe(`every route refuses hostile requests (${RUNS} cases each), and nothing changes`, () => {
  test.each(routeIds.map((id) => [id]))(
    '%s',
    async (id) => {
      await fc.assert(
        fc.asyncProperty(caseOf(id, owned), (c) => check(id, c)),
        { numRuns: RUNS, seed: SEED, maxSkipsPerRun: 1000, endOnFailure: true },
      );
    },
    Math.max(60_000, RUNS * 400),
  );
});

test('every route of the manifest was probed', () => {
  expect([...counts.keys()].sort()).toEqual([...routeIds].sort());
});
