import { describe, expect, test } from '@jest/globals';
import { deliver } from '../support/webhooks.js';
import { asDelivered, type PutEventsEntry } from './fakes/aws.js';
import type { FakeCheckRun } from './fakes/github-checks.js';
import { absent, useGateTier } from './gate-tier.js';

/*
 * What a pull request asks of the merge gate, in the cloud simulation tier: GitHub's deliveries, signed
 * with the App's webhook secret, reach the real webhook handler in PREVIEW_MODE=aws, which publishes a
 * `Merge Gate Requested` event to the service's bus (the AWS fake records PutEvents); that event, handed
 * to the rule's target as EventBridge would, acts on the head's check run at the GitHub fake. The re-run
 * button, `Re-run failed tests`, `/preview skip-tests <reason>` (trusted or not), and a failed preview.
 */

const onX64Linux = process.platform === 'linux' && process.arch === 'x64';
const HOOK_SECRET = 'x'; // the App secret's webhookSecret (github-cloud.ts's default)

const {
  t,
  updated,
  pullRequestUpdated,
  commit,
  importTest,
  deployOf,
  markReady,
  runsSince,
  playRun,
  runsOf,
  story,
  setPage,
} = useGateTier('cloud-gate-requests', { EVENT_BUS_NAME: 'preview-events' });

const gateEvents = () =>
  (t.cloud.aws.events as PutEventsEntry[]).filter((e) => e.DetailType === 'Merge Gate Requested');

/** Deliver one signed webhook; hand each `Merge Gate Requested` it published to the rule's target. */
async function request(event: string, payload: unknown, id?: string) {
  const before = gateEvents().length;
  const res = await deliver(t.cloud, HOOK_SECRET, event, payload, id ? { id } : {});
  const published = gateEvents().slice(before);
  const outcomes: string[] = [];
  for (const [i, e] of published.entries())
    outcomes.push(
      (
        await t.cloud.invoke<{ outcome: string }>(
          'functions/events/gate-requested.ts',
          asDelivered(e, `${res.deliveryId}-${i}`),
        )
      ).outcome,
    );
  return { res, published, outcomes };
}

/** A `check_run` delivery of our check run, as GitHub sends it when a button on it is pressed. */
function checkRunPayload(run: FakeCheckRun, action: 'rerequested' | 'requested_action', identifier?: string) {
  return {
    action,
    check_run: {
      id: run.id,
      name: run.name,
      head_sha: run.head_sha,
      external_id: run.external_id,
      status: run.status,
      conclusion: run.conclusion,
      pull_requests: [],
    },
    ...(identifier ? { requested_action: { identifier } } : {}),
    sender: { login: 'octocat' },
    repository: { full_name: 'acme/shop' },
    installation: { id: 1 },
  };
}

/** A head through its first story: deploy requested, preview ready, every run played. */
async function firstStory(pr: number, label: string) {
  const sha = commit(label);
  expect(await pullRequestUpdated(updated(pr, sha))).toEqual({ outcome: 'deploy requested' });
  const from = t.started.length;
  await markReady(pr);
  const runs = runsSince(from);
  for (const r of runs) await playRun(r);
  return { sha, runs };
}

describe('GitHub’s re-run button (check_run rerequested)', () => {
  (onX64Linux ? test : test.skip)(
    'opens a fresh story on the same head: a new check run, every test run again, completed',
    async () => {
      const { sha, runs } = await firstStory(41, 'rerun-all');
      expect(runs).toHaveLength(1);
      const [first] = runsOf(sha);
      expect(first).toMatchObject({ status: 'completed', conclusion: 'success' });
      const firstWrites = story(sha).length;

      const from = t.started.length;
      const { res, published, outcomes } = await request('check_run', checkRunPayload(first!, 'rerequested'));
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ accepted: true, deliveryId: res.deliveryId, events: 1 });
      expect(JSON.parse(published[0]!.Detail)).toMatchObject({
        orgId: t.org.orgId,
        prNumber: 41,
        request: { action: 'rerun', headSha: sha, by: 'octocat' },
      });
      expect(outcomes).toEqual(['every test running again']);
      const again = runsSince(from);
      expect(again).toHaveLength(1);
      expect(again[0]!.runId).not.toBe(runs[0]!.runId);

      for (const r of again) await playRun(r);
      const checkRuns = runsOf(sha);
      expect(checkRuns).toHaveLength(2);
      const [old, fresh] = checkRuns;
      // The first story stays as it ended; the second is a check run of its own, its story 2.
      expect(old).toEqual(first);
      expect(fresh!.external_id).toMatch(new RegExp(`^[0-9a-f]{12}:acme/shop#41@${sha}/2$`));
      expect(fresh).toMatchObject({ status: 'completed', conclusion: 'success', name: 'Preview tests' });
      expect(fresh!.output.summary).toContain(again[0]!.runId);
      expect(fresh!.output.summary).not.toContain(runs[0]!.runId);
      // Its writes: a POST, then PATCHes, completed once and last; the first check run untouched.
      const writes = t.github.checkRuns.storyOf(fresh!.id);
      expect(writes.map((w) => w.method)).toEqual(['POST', ...writes.slice(1).map(() => 'PATCH')]);
      expect(writes.at(-1)!.body).toMatchObject({ status: 'completed', conclusion: 'success' });
      expect(writes.filter((w) => w.body.status === 'completed')).toHaveLength(1);
      expect(writes.map((w) => w.body.status)).toContain('in_progress');
      expect(t.github.checkRuns.storyOf(first!.id)).toHaveLength(firstWrites);
      // The check run completes as the last run ends (the run's own task writes it), not by a later sweep.
      const { loadRun } = await import('../../functions/core/runs/index.js');
      const ended = Date.parse(String((await loadRun(again[0]!.runId))?.endedAt));
      const lag = Date.parse(writes.at(-1)!.receivedAt) - ended;
      expect(lag).toBeGreaterThanOrEqual(0);
      expect(lag).toBeLessThan(5_000);
      if (process.env.GATE_TIMING) process.stdout.write(`run end → completed check run: ${lag} ms\n`);

      // GitHub redelivers the same press (its delivery id again): ignored, nothing published or written.
      const total = t.github.checkRuns.writes.length;
      const redo = await request('check_run', checkRunPayload(first!, 'rerequested'), res.deliveryId);
      expect(redo.res.status).toBe(202);
      expect(redo.res.body).toEqual({ ignored: expect.any(String) });
      expect(redo.published).toEqual([]);
      expect(t.github.checkRuns.writes).toHaveLength(total);
      expect(runsOf(sha)).toHaveLength(2);
    },
    240_000,
  );
});

describe('Re-run failed tests (check_run requested_action rerun-failed)', () => {
  (onX64Linux ? test : test.skip)(
    'runs only the failed test again and keeps the passed result in the fresh story',
    async () => {
      await importTest('Heading on previews', [absent]);
      const { sha, runs } = await firstStory(42, 'rerun-failed');
      expect(runs).toHaveLength(2);
      const [first] = runsOf(sha);
      expect(first).toMatchObject({ status: 'completed', conclusion: 'failure' });
      expect(first!.actions).toEqual([expect.objectContaining({ identifier: 'rerun-failed' })]);
      const line = (summary: string | null, name: string) =>
        summary?.split('\n').find((l) => l.startsWith(`| ${name} |`)) ?? '';
      const passed = runs.find((r) => line(first!.output.summary, 'Home on previews').includes(r.runId))!;
      const failed = runs.find((r) => line(first!.output.summary, 'Heading on previews').includes(r.runId))!;
      expect(line(first!.output.summary, 'Home on previews')).toContain('`passed`');
      expect(line(first!.output.summary, 'Heading on previews')).toContain('`failed`');
      expect([passed, failed].every(Boolean)).toBe(true);
      const firstWrites = story(sha).length;

      // The page now says what the failing test looks for: the failed test passes when run again.
      setPage('<h1 id="home">Home</h1><p>Nowhere to be seen</p>');
      try {
        const from = t.started.length;
        const { res, outcomes } = await request(
          'check_run',
          checkRunPayload(first!, 'requested_action', 'rerun-failed'),
        );
        expect(res.status).toBe(202);
        expect(outcomes).toEqual(['1 failed test(s) running again']);
        // One run started: the failed test's; the passed one is not run again.
        const again = runsSince(from);
        expect(again).toHaveLength(1);
        expect([passed.runId, failed.runId]).not.toContain(again[0]!.runId);
        for (const r of again) await playRun(r);

        expect(runsOf(sha)).toHaveLength(2);
        const fresh = runsOf(sha)[1]!;
        expect(fresh.external_id).toMatch(/\/2$/);
        expect(fresh).toMatchObject({ status: 'completed', conclusion: 'success', actions: [] });
        expect(fresh.output.title).toBe('2 tests passed');
        // The summary keeps the passed result (its run, not a new one) beside the failed test's new run.
        expect(line(fresh.output.summary, 'Home on previews')).toContain(passed.runId);
        expect(line(fresh.output.summary, 'Heading on previews')).toContain(again[0]!.runId);
        expect(fresh.output.summary).not.toContain(failed.runId);
        const writes = t.github.checkRuns.storyOf(fresh.id);
        expect(writes.map((w) => w.method)).toEqual(['POST', ...writes.slice(1).map(() => 'PATCH')]);
        expect(writes.filter((w) => w.body.status === 'completed')).toHaveLength(1);
        expect(writes.at(-1)!.body).toMatchObject({ status: 'completed', conclusion: 'success' });
        expect(t.github.checkRuns.storyOf(first!.id)).toHaveLength(firstWrites);
      } finally {
        setPage();
      }
    },
    240_000,
  );
});

/** An `issue_comment` `created` delivery on pull request `pr`, by `login` with its author_association. */
const comment = (pr: number, body: string, login: string, association: string) => ({
  action: 'created',
  issue: { number: pr, pull_request: { url: `https://api.github.com/repos/acme/shop/pulls/${pr}` } },
  comment: { id: 900 + pr, body, author_association: association, user: { login } },
  repository: { full_name: 'acme/shop' },
  installation: { id: 1 },
  sender: { login },
});

describe('/preview skip-tests <reason>', () => {
  (onX64Linux ? test : test.skip)(
    'from a user without association: ignored, nothing written; from a collaborator: neutral, naming who and why',
    async () => {
      const sha = commit('skip');
      expect(await pullRequestUpdated(updated(43, sha))).toEqual({ outcome: 'deploy requested' });
      const from = t.started.length;
      await markReady(43);
      const runs = runsSince(from);
      expect(runs.length).toBeGreaterThan(0);
      expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'in_progress' })]);

      const writes = t.github.checkRuns.writes.length;
      const calls = t.github.calls().length;
      const outsider = await request(
        'issue_comment',
        comment(43, '/preview skip-tests trust me', 'mallory', 'NONE'),
      );
      expect(outsider.res.status).toBe(202);
      expect(outsider.res.body).toEqual({
        ignored: expect.stringContaining('mallory (NONE) may not skip the tests'),
      });
      expect(outsider.published).toEqual([]);
      expect(t.github.checkRuns.writes).toHaveLength(writes);
      // No write of any kind reached GitHub (a check run, a comment).
      expect(
        t.github
          .calls()
          .slice(calls)
          .filter((c) => !c.startsWith('GET ')),
      ).toEqual([]);
      expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'in_progress', conclusion: null })]);

      const trusted = await request(
        'issue_comment',
        comment(43, '/preview skip-tests docs-only change\nmore words', 'alice', 'COLLABORATOR'),
      );
      expect(trusted.res.status).toBe(202);
      expect(JSON.parse(trusted.published[0]!.Detail)).toMatchObject({
        prNumber: 43,
        request: { action: 'skip', by: 'alice', reason: 'docs-only change' },
      });
      expect(trusted.outcomes).toEqual(['skipped by alice']);
      const [run] = runsOf(sha);
      expect(run).toMatchObject({ status: 'completed', conclusion: 'neutral' });
      expect(run!.output.title).toBe('Skipped by alice: docs-only change');
      expect(run!.output.summary).toContain('**alice** skipped the tests: docs-only change');
      const last = t.github.checkRuns.writes.at(-1)!;
      expect(last).toMatchObject({
        method: 'PATCH',
        id: run!.id,
        body: { status: 'completed', conclusion: 'neutral' },
      });
      expect(runsOf(sha)).toHaveLength(1);

      // The runs end afterwards: the skip is what the check run shows.
      for (const r of runs) await playRun(r);
      expect(runsOf(sha)[0]).toMatchObject({ status: 'completed', conclusion: 'neutral' });
    },
    240_000,
  );
});

describe('/preview skip-tests without a reason', () => {
  test('is refused in a reply comment naming the commenter; the check run goes on', async () => {
    const sha = commit('no-reason');
    t.github.setPull('acme/shop', 45, { headSha: sha, headRef: 'feature-45' });
    expect(await pullRequestUpdated(updated(45, sha))).toEqual({ outcome: 'deploy requested' });
    expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'queued' })]);
    const checkWrites = t.github.checkRuns.writes.length;
    const commentWrites = t.github.issueComments.writes.length;

    const { res, published, outcomes } = await request(
      'issue_comment',
      comment(45, '/preview skip-tests   ', 'alice', 'MEMBER'),
    );
    expect(res.status).toBe(202);
    expect(JSON.parse(published[0]!.Detail)).toMatchObject({
      request: { action: 'skip', by: 'alice', reason: '' },
    });
    expect(outcomes).toEqual(['skip refused: no reason']);
    const replies = t.github.issueComments.writes.slice(commentWrites);
    expect(replies).toEqual([
      { method: 'POST', repo: 'acme/shop', issue: 45, id: expect.any(Number), body: expect.any(String) },
    ]);
    expect(replies[0]!.body).toMatch(
      /^@alice The tests were not skipped: `\/preview skip-tests` needs a reason/,
    );
    expect(t.github.calls()).toContain('POST /repos/acme/shop/issues/45/comments');
    // The check run is as it was: not skipped, not completed.
    expect(t.github.checkRuns.writes).toHaveLength(checkWrites);
    expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'queued', conclusion: null })]);
  }, 60_000);
});

describe('a failed preview (the deploy’s MarkFailed)', () => {
  test('completes the head’s check run failure, its title saying the preview failed, not a test', async () => {
    const sha = commit('broken');
    expect(await pullRequestUpdated(updated(44, sha))).toEqual({ outcome: 'deploy requested' });
    expect(runsOf(sha)).toEqual([expect.objectContaining({ status: 'queued' })]);
    const from = t.started.length;

    // The deploy's Catch: MarkFailed with the error its state machine caught.
    const failure = { Error: 'RolloutFailed', Cause: 'app web: the rollout did not become ready in 600 s' };
    await t.cloud.invoke('functions/steps/mark-failed.ts', { ...deployOf(44).input, failure });

    const [run] = runsOf(sha);
    expect(run).toMatchObject({ status: 'completed', conclusion: 'failure', actions: [] });
    expect(run!.output.title).toBe('The preview failed: no test ran against it');
    expect(run!.output.title).not.toMatch(/tests? failed/);
    expect(run!.output.summary).toContain('The preview of this commit failed, so its tests could not run.');
    expect(run!.output.summary).toContain('the rollout did not become ready in 600 s');
    expect(story(sha).map((w) => w.body.status)).toEqual(['queued', 'completed']);
    // No test ran against the failed preview.
    expect(runsSince(from)).toEqual([]);

    // Step Functions retries the task: nothing more is written.
    const writes = t.github.checkRuns.writes.length;
    await t.cloud.invoke('functions/steps/mark-failed.ts', { ...deployOf(44).input, failure });
    expect(t.github.checkRuns.writes).toHaveLength(writes);
  }, 60_000);
});
