import { describe, expect, test } from '@jest/globals';
import { pages } from '../../functions/manifest/routes.js';
import { API_HOST, absent, STAGE, useGateTier } from './gate-tier.js';

/*
 * The merge gate in the cloud simulation tier: the real event and step handlers in PREVIEW_MODE=aws
 * create and update the head commit's `Preview tests` check run through the GitHub App's installation
 * token, at the GitHub fake (fakes/github-checks.ts keeps every POST and PATCH). The state machines'
 * executions are recorded, not run: each test plays the states itself (the deploy's MarkReady with the
 * preview's URL, then each run's Prepare and Execute against a loopback app), as Step Functions would,
 * and plays some of them twice, as Step Functions and EventBridge may.
 */

const onX64Linux = process.platform === 'linux' && process.arch === 'x64';

const {
  t,
  updated,
  pullRequestUpdated,
  commit,
  importTest,
  markReady,
  runsSince,
  playRun,
  runsOf,
  story,
  statuses,
} = useGateTier('cloud-gate');

describe('a head commit’s check run, through the GitHub App', () => {
  (onX64Linux ? test : test.skip)(
    'queued at the deploy request, in_progress while its runs run, completed success; replays change nothing',
    async () => {
      const sha = commit('pass');
      expect(await pullRequestUpdated(updated(31, sha))).toEqual({ outcome: 'deploy requested' });
      expect(runsOf(sha)).toHaveLength(1);
      expect(runsOf(sha)[0]).toMatchObject({ name: 'Preview tests', status: 'queued', conclusion: null });
      expect(story(sha)[0]).toMatchObject({ method: 'POST', body: { name: 'Preview tests', head_sha: sha } });

      const from = t.started.length;
      await markReady(31);
      const runs = runsSince(from);
      expect(runs).toHaveLength(1);
      expect(runsOf(sha)[0]!.status).toBe('in_progress');

      const execute = await playRun(runs[0]!);
      const [run] = runsOf(sha);
      expect(run).toMatchObject({ status: 'completed', conclusion: 'success' });
      expect(run!.output.title).toBe('1 test passed');
      expect(run!.output.summary).toContain('Home on previews');
      expect(run!.completed_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(statuses(sha)).toEqual(['queued', 'in_progress', 'completed']);
      expect(t.github.calls()).toContain(`PATCH /repos/acme/shop/check-runs/${run!.id}`);

      // EventBridge delivers the event again; Step Functions retries Execute: no second write.
      const writes = t.github.checkRuns.writes.length;
      expect(await pullRequestUpdated(updated(31, sha, new Date(t.clock).toISOString()))).toEqual({
        outcome: 'stale',
      });
      await t.cloud.invoke('functions/steps/run-execute.ts', execute, 600_000).catch(() => undefined);
      expect(t.github.checkRuns.writes).toHaveLength(writes);
      expect(runsOf(sha)).toHaveLength(1);
    },
    240_000,
  );

  (onX64Linux ? test : test.skip)(
    'a failing test fails it, naming the failed step, with the re-run button',
    async () => {
      await importTest('Heading on previews', [absent]);
      const sha = commit('fail');
      await pullRequestUpdated(updated(32, sha));
      const from = t.started.length;
      await markReady(32);
      const runs = runsSince(from);
      expect(runs).toHaveLength(2);
      for (const r of runs) await playRun(r);
      const [run] = runsOf(sha);
      expect(run).toMatchObject({ status: 'completed', conclusion: 'failure' });
      expect(run!.output.title).toBe('1 test failed of 2');
      expect(run!.output.text).toContain('### Heading on previews');
      expect(run!.actions).toEqual([expect.objectContaining({ identifier: 'rerun-failed' })]);
      expect(statuses(sha).filter((s) => s === 'completed')).toHaveLength(1);
      expect(runsOf(sha)).toHaveLength(1);
    },
    240_000,
  );
});

describe('a newer push', () => {
  test('cancels the older head’s check run, naming the newer commit, and queues its own', async () => {
    const older = commit('older');
    const newer = commit('newer');
    expect(await pullRequestUpdated(updated(33, older))).toEqual({ outcome: 'deploy requested' });
    expect(runsOf(older)[0]!.status).toBe('queued');

    const newerEvent = updated(33, newer);
    expect(await pullRequestUpdated(newerEvent)).toEqual({ outcome: 'deploy requested' });
    const [old] = runsOf(older);
    expect(old).toMatchObject({ status: 'completed', conclusion: 'cancelled' });
    expect(old!.output.title).toContain(newer.slice(0, 12));
    expect(runsOf(newer)).toEqual([expect.objectContaining({ status: 'queued' })]);

    // The same event again, and the older one late: one check run per head, nothing rewritten.
    const writes = t.github.checkRuns.writes.length;
    expect(await pullRequestUpdated(newerEvent)).toEqual({ outcome: 'stale' });
    expect(await pullRequestUpdated(updated(33, older, '2032-01-01T00:00:00.000Z'))).toEqual({
      outcome: 'stale',
    });
    expect(t.github.checkRuns.writes).toHaveLength(writes);
    expect([runsOf(older).length, runsOf(newer).length]).toEqual([1, 1]);
    expect(t.logs.join('\n')).not.toMatch(/ghs_[0-9a-f]{36}/);
  }, 60_000);
});

describe('a writer that dies after GitHub created the check run, before the record stored its id', () => {
  (onX64Linux ? test : test.skip)(
    'the next sync finds it by its external_id and adopts it: one check run, completed',
    async () => {
      const sha = commit('dies');
      const { ddb } = await import('../../functions/shared/aws/dynamo.js');
      // The store of the new check run's id fails once, as a writer killed right after GitHub's answer.
      let failures = 0;
      const name = 'dieBetweenCreateAndStore';
      ddb().middlewareStack.add(
        (next) => async (args) => {
          const expression = (args.input as { UpdateExpression?: unknown }).UpdateExpression;
          if (failures === 0 && typeof expression === 'string' && expression.startsWith('SET checkRunId')) {
            failures++;
            throw Object.assign(new Error('the writer died'), { name: 'WriterDied' });
          }
          return next(args);
        },
        { step: 'initialize', name },
      );
      try {
        expect(await pullRequestUpdated(updated(34, sha))).toEqual({ outcome: 'deploy requested' });
      } finally {
        ddb().middlewareStack.remove(name);
      }
      expect(failures).toBe(1);
      // GitHub has the check run; the record does not know it.
      expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'queued' })]);
      const created = runsOf(sha)[0]!;
      expect(created.external_id).toMatch(new RegExp(`^[0-9a-f]{12}:acme/shop#34@${sha}/1$`));

      const from = t.started.length;
      await markReady(34);
      const runs = runsSince(from);
      for (const r of runs) await playRun(r);

      expect(runsOf(sha)).toHaveLength(1);
      // Run alone, only the passing test is imported; after the failing-test case, its test fails too.
      expect(runsOf(sha)[0]).toMatchObject({
        id: created.id,
        status: 'completed',
        conclusion: runs.length > 1 ? 'failure' : 'success',
      });
      // One POST (the dead writer's), then PATCHes of that check run: in_progress, completed once, last.
      const writes = story(sha);
      expect(writes.map((w) => w.method)).toEqual(['POST', ...writes.slice(1).map(() => 'PATCH')]);
      expect(writes.map((w) => w.body.status)).toEqual([
        'queued',
        ...writes.slice(1, -1).map(() => 'in_progress'),
        'completed',
      ]);
      expect(writes.length).toBeGreaterThanOrEqual(3);
      expect(t.github.calls()).toContain(`GET /repos/acme/shop/commits/${sha}/check-runs`);
      expect(t.logs.join('\n')).toContain('adopted the check run an earlier writer created');
    },
    240_000,
  );
});

describe('a MarkReady Step Functions runs twice', () => {
  (onX64Linux ? test : test.skip)(
    'starts one set of runs, which the gate follows: one check run, one story',
    async () => {
      const sha = commit('twice');
      await pullRequestUpdated(updated(35, sha));
      const from = t.started.length;
      const input = await markReady(35);
      const runs = runsSince(from);
      expect(runs.length).toBeGreaterThan(0);
      // The task again, with the same input (a retry after its Lambda timed out, say).
      await t.cloud.invoke('functions/steps/mark-ready.ts', input);
      expect(runsSince(from)).toEqual(runs);

      const { gateRecord } = await import('../../functions/core/gate/index.js');
      const record = await gateRecord({ orgId: t.org.orgId, envKey: 'acme/shop#35' }, sha);
      expect(record?.runIds).toEqual(runs.map((r) => r.runId));

      for (const r of runs) await playRun(r);
      expect(runsOf(sha)).toHaveLength(1);
      expect(runsOf(sha)[0]!.status).toBe('completed');
      expect(statuses(sha).filter((s) => s === 'completed')).toHaveLength(1);
      // Every run of the head is in the story the check run tells.
      for (const r of runs) expect(runsOf(sha)[0]!.output.summary).toContain(r.runId);

      // Once more after the story completed: still no run started, nothing written.
      const writes = t.github.checkRuns.writes.length;
      await t.cloud.invoke('functions/steps/mark-ready.ts', input);
      expect(runsSince(from)).toEqual(runs);
      expect(t.github.checkRuns.writes).toHaveLength(writes);
    },
    240_000,
  );
});

/** A GET of the API's `gatePage`, as API Gateway hands it to the page's function (under its stage). */
async function openPage(url: string) {
  const link = new URL(url);
  expect(link.host).toBe(API_HOST);
  const path = link.pathname.slice(STAGE.length + 1);
  const m = new RegExp(`^${pages.gatePage.path.replace(/\{\w+\}/g, '([^/]+)')}$`).exec(path);
  expect(m).not.toBeNull();
  const [org_id, owner, repo, pr, sha] = m!.slice(1).map(decodeURIComponent);
  return t.cloud.invoke<{ statusCode: number; headers: Record<string, string>; body: string }>(
    pages.gatePage.entry,
    {
      httpMethod: 'GET',
      path,
      resource: pages.gatePage.path,
      pathParameters: { org_id, owner, repo, pr, sha },
      queryStringParameters: Object.fromEntries(link.searchParams),
      headers: { Host: API_HOST },
      requestContext: { stage: STAGE, domainName: API_HOST, requestId: `req-${Date.now()}` },
      body: null,
      isBase64Encoded: false,
    },
  );
}

describe('details_url in AWS: a signed page of the head commit’s gate', () => {
  (onX64Linux ? test : test.skip)(
    'every write carries it; the page answers that head’s runs with their reports; a tampered or expired link does not',
    async () => {
      const sha = commit('details');
      await pullRequestUpdated(updated(34, sha));
      const from = t.started.length;
      await markReady(34);
      for (const r of runsSince(from)) await playRun(r);
      const [run] = runsOf(sha);
      expect(run).toMatchObject({ status: 'completed' });
      const writes = story(sha);
      expect(writes.length).toBeGreaterThanOrEqual(3);
      const details = writes.map((w) => w.body.details_url as string);
      for (const d of details)
        expect(d).toMatch(
          new RegExp(
            `^https://${API_HOST}/${STAGE}/gate/${t.org.orgId}/acme/shop/34/${sha}\\?expires=\\d+&sig=`,
          ),
        );
      expect(run!.details_url).toBe(details.at(-1));

      const page = await openPage(run!.details_url!);
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.headers['content-security-policy']).toContain("default-src 'none'");
      expect(page.body).toContain(`<span id="title">${run!.output.title}</span>`);
      expect(page.body).toContain(sha);
      const report = /<a href="([^"]+)">report<\/a>/.exec(page.body)?.[1]?.replace(/&amp;/g, '&');
      expect(report).toMatch(new RegExp(`^https://${API_HOST}/${STAGE}/report/`));
      expect(page.body).not.toMatch(/ghs_[0-9a-f]{36}/);

      const tampered = new URL(run!.details_url!);
      tampered.pathname = tampered.pathname.replace('/34/', '/35/');
      expect((await openPage(tampered.href)).statusCode).toBe(403);
      const resigned = new URL(run!.details_url!);
      resigned.searchParams.set('expires', String(Number(resigned.searchParams.get('expires')) + 1));
      expect((await openPage(resigned.href)).statusCode).toBe(403);
      const { mediaReader } = await import('../../functions/ports/registry/media.js');
      const expired = new URL(run!.details_url!);
      const pathOnly = expired.pathname.slice(STAGE.length + 1);
      expired.search = await mediaReader().signLink(pathOnly, -60);
      expect((await openPage(expired.href)).statusCode).toBe(410);

      // The API's reads of the same gate, in PREVIEW_MODE=aws: the environment's field and the head's view.
      const headers = { authorization: `Bearer ${t.org.apiKey}` };
      const env = await fetch(`${t.cloud.url}/v1/preview/environments/acme/shop/34`, { headers });
      expect(env.status).toBe(200);
      expect(((await env.json()) as { gate: unknown }).gate).toEqual({
        status: 'completed',
        conclusion: run!.conclusion,
        title: run!.output.title,
        headSha: sha,
      });
      const view = await fetch(`${t.cloud.url}/v1/preview/environments/acme/shop/34/gate?commit=${sha}`, {
        headers,
      });
      expect(view.status).toBe(200);
      const body = (await view.json()) as { title: string; runs: { reportUrl?: string }[] };
      expect(body.title).toBe(run!.output.title);
      expect(body.runs.length).toBeGreaterThan(0);
      for (const r of body.runs) expect(r.reportUrl).toMatch(/\/report\/[A-Za-z0-9_-]+\?expires=\d+&sig=/);
    },
    240_000,
  );
});
