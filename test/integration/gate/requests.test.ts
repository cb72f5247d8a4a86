import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { bearer, call } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import {
  checkRuns as checkRunsOf,
  completedCheckRun,
  lastCall,
  outbox as outboxOf,
  outputOf,
} from '../../support/check-runs.js';
import { commitFiles } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl } from '../../support/process.js';
import { RUNS_APP_JS } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';
import { closeSnapshots, snapshot } from '../../support/stored-state.js';
import { deliver, prPayload } from '../../support/webhooks.js';

/*
 * The merge gate driven from the pull request, through signed webhook deliveries to the local server:
 * the check run queued when the deploy is requested, a superseded head cancelled, GitHub's re-run
 * button and `Re-run failed tests`, and `/preview skip-tests <reason>` with and without the right.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/gatehooks' });
let secret: string;

beforeAll(async () => {
  secret = readFileSync(join(h.dataDir, 'github-webhook-secret'), 'utf8').trim();
  await app.importTest({ name: 'Sign up passes', run_on_preview: true });
  await app.importTest({
    name: 'Heading fails',
    run_on_preview: true,
    step_timeout_seconds: 2,
    steps: [{ interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' }],
  });
}, 60_000);
afterAll(closeSnapshots);

const outbox = () => outboxOf(h.dataDir);
const checkRuns = (sha: string) => checkRunsOf(h.dataDir, sha);
const completedRun = (sha: string, count = 1) => completedCheckRun(h.dataDir, sha, count);

const send = (event: string, payload: unknown) => deliver(h, secret, event, payload);
const commit = (label: string) =>
  commitFiles(h.gitRoot, app.repo, {
    'server.js': RUNS_APP_JS.replace('Sign up</h1>', `Sign up ${label}</h1>`),
  });
const checkRunPayload = (sha: string, id: number, pr: number, action: string, identifier?: string) => ({
  action,
  check_run: { id, name: 'Preview tests', head_sha: sha, external_id: `${pr}/1`, pull_requests: [] },
  ...(identifier ? { requested_action: { identifier } } : {}),
  repository: { full_name: app.repo },
  installation: { id: 1 },
  sender: { login: 'octocat' },
});
const comment = (pr: number, body: string, association: string, login = 'octocat') => ({
  action: 'created',
  issue: { number: pr, pull_request: { url: 'x' } },
  comment: { body, author_association: association, user: { login } },
  repository: { full_name: app.repo },
  installation: { id: 1 },
});

describe('the check run from the pull request', () => {
  test('queued when the deploy is requested; a newer head cancels it, naming the newer commit', async () => {
    const first = commit('first');
    await send('pull_request', prPayload('opened', { number: 21, sha: first, repo: app.repo }));
    await h.service.bus.idle();
    // The deploy was requested: its check run is queued before the preview is ready.
    const post = checkRuns(first)[0]!.calls[0]!;
    expect(post.body).toMatchObject({ name: 'Preview tests', head_sha: first, status: 'queued' });
    const second = commit('second');
    await send('pull_request', prPayload('synchronize', { number: 21, sha: second, repo: app.repo }));
    const cancelled = await completedRun(first);
    expect(cancelled.body).toMatchObject({ status: 'completed', conclusion: 'cancelled' });
    expect(outputOf(cancelled).title).toBe(`Cancelled: superseded by ${second.slice(0, 12)}`);
    expect(outputOf(cancelled).summary).toContain(second);
    // The newer head tells its own story to the end: one test failed.
    const end = await completedRun(second);
    expect(end.body).toMatchObject({ conclusion: 'failure' });
    expect(outputOf(end).title).toBe('1 test failed of 2');
  }, 180_000);

  test('re-run all, then re-run failed: fresh stories on the same head, the passed result kept', async () => {
    const sha = commit('rerun');
    await send('pull_request', prPayload('opened', { number: 22, sha, repo: app.repo }));
    const first = await completedRun(sha, 1);
    expect(first.body.conclusion).toBe('failure');
    const firstId = checkRuns(sha)[0]!.id;
    const passedRun =
      /\| Sign up passes \| `passed` \|[^|]*\|[^|]*\| \[report\]\([^)]*\/report\/([a-z0-9]+)\?[^)]*\) \|/.exec(
        outputOf(first).summary,
      )![1];

    const all = await send('check_run', checkRunPayload(sha, firstId, 22, 'rerequested'));
    expect(all.status).toBe(202);
    expect(all.body.accepted).toBe(true);
    const again = await completedRun(sha, 2);
    expect(again.body).toMatchObject({ status: 'completed', conclusion: 'failure' });
    // Every test ran again: neither run id of the first story is shown.
    expect(outputOf(again).summary).not.toContain(passedRun);
    expect(outputOf(again).summary).toContain('Sign up passes');

    const secondId = checkRuns(sha)[1]!.id;
    const secondPassed =
      /\| Sign up passes \| `passed` \|[^|]*\|[^|]*\| \[report\]\([^)]*\/report\/([a-z0-9]+)\?[^)]*\) \|/.exec(
        outputOf(again).summary,
      )![1]!;
    const failed = await send(
      'check_run',
      checkRunPayload(sha, secondId, 22, 'requested_action', 'rerun-failed'),
    );
    expect(failed.body.accepted).toBe(true);
    const third = await completedRun(sha, 3);
    expect(third.body.conclusion).toBe('failure');
    // The passed test did not run again: its result from the second story is kept.
    expect(outputOf(third).summary).toContain(`/report/${secondPassed}?`);
    expect(outputOf(third).text).toContain('### Heading fails');
    // Each story completed once.
    for (const run of checkRuns(sha))
      expect(run.calls.filter((l) => l.body.status === 'completed')).toHaveLength(1);
  }, 240_000);

  test('/preview skip-tests: neutral from a collaborator; ignored from anyone else; refused without a reason', async () => {
    const sha = commit('skip');
    await send('pull_request', prPayload('opened', { number: 23, sha, repo: app.repo }));
    await completedRun(sha);

    const stranger = await send(
      'issue_comment',
      comment(23, '/preview skip-tests let me in', 'NONE', 'mallory'),
    );
    expect(stranger.status).toBe(202);
    expect(stranger.body.ignored).toMatch(/mallory \(NONE\) may not skip the tests/);

    const empty = await send('issue_comment', comment(23, '/preview skip-tests   ', 'MEMBER'));
    expect(empty.body.accepted).toBe(true);
    await pollUntil(
      h,
      h.org,
      `/v1/preview/environments/${app.repo}/23`,
      () =>
        outbox().some(
          (l) => l.path.endsWith('/issues/23/comments') && /needs a reason/.test(String(l.body.body)),
        ),
      30_000,
    );
    expect(lastCall(checkRuns(sha)[0]!).body.conclusion).toBe('failure');

    const skip = await send(
      'issue_comment',
      comment(23, '/preview skip-tests docs-only change', 'COLLABORATOR'),
    );
    expect(skip.body.accepted).toBe(true);
    const deadline = Date.now() + 30_000;
    while (lastCall(checkRuns(sha)[0]!).body.conclusion !== 'neutral' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    const end = lastCall(checkRuns(sha)[0]!);
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'neutral' });
    expect(outputOf(end).title).toBe('Skipped by octocat: docs-only change');
  }, 180_000);
});

describe('the skip from the API: previewctl gate skip', () => {
  test('completes the head neutral naming who and why; bad input is a 4xx and changes nothing', async () => {
    const sha = commit('api-skip');
    await send('pull_request', prPayload('opened', { number: 24, sha, repo: app.repo }));
    expect((await completedRun(sha)).body.conclusion).toBe('failure');
    const path = `/v1/preview/environments/${app.repo}/24/gate/skip`;
    const other = await h.newOrg('other');
    const before = await snapshot(h.dataDir);
    for (const [body, status, message] of [
      [undefined, 400, /body/],
      [{ by: 'alice' }, 400, /reason/],
      [{ by: 'alice', reason: '  ' }, 400, /reason: must not be empty/],
    ] as const) {
      const res = await call(h, 'POST', path, { headers: bearer(h.org), body });
      expect([res.status, res.body.error]).toEqual([status, expect.stringMatching(message)]);
    }
    const theirs = await call(h, 'POST', path, { headers: bearer(other), body: { by: 'm', reason: 'mine' } });
    expect(theirs.status).toBe(404);
    const none = await call(h, 'POST', `/v1/preview/environments/${app.repo}/999/gate/skip`, {
      headers: bearer(h.org),
      body: { by: 'alice', reason: 'x' },
    });
    expect(none.status).toBe(404);
    expect(await snapshot(h.dataDir)).toEqual(before);

    const skipped = await previewctl(
      h.dataDir,
      ...['gate', 'skip', '--repo', app.repo, '--pr', '24', '--reason', 'release freeze', '--by', 'alice'],
    );
    expect(skipped).toMatchObject({ code: 0, out: { sha, conclusion: 'neutral' } });
    const end = lastCall(checkRuns(sha)[0]!);
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'neutral' });
    expect(outputOf(end).title).toBe('Skipped by alice: release freeze');
  }, 180_000);
});
