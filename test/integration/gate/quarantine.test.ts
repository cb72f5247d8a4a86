import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { call, client } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { completedCheckRun, outputOf } from '../../support/check-runs.js';
import { commitFiles } from '../../support/git.js';
import { localServerForFile, requestDeploy } from '../../support/local-server.js';
import { previewctl, previewctlRaw } from '../../support/process.js';
import { RUNS_APP_JS } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';
import { closeSnapshots, snapshot } from '../../support/stored-state.js';

/*
 * Quarantine through the local server: a quarantined test's failure leaves the check run `success` and
 * the summary names it with its owner and end; once its end passes it fails the gate again. The routes'
 * bad input: a clear 4xx and nothing stored changes; another organization's test is not found.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/quarantine' });
let passing: string;
let failing: string;
let plain: string;

beforeAll(async () => {
  passing = await app.importTest({ name: 'Sign up passes', run_on_preview: true });
  failing = await app.importTest({
    name: 'Heading fails',
    run_on_preview: true,
    step_timeout_seconds: 2,
    steps: [{ interaction: 'assert-text', instruction: 'It says "Nowhere to be seen"' }],
  });
  plain = await app.importTest({ name: 'Not on previews' });
}, 60_000);
afterAll(closeSnapshots);

const quarantine = (testId: string, body: unknown, org = h.org) =>
  call(h, 'PUT', `/test/${testId}/quarantine`, { headers: client(org), body });

async function prCheckRun(pr: number, label: string) {
  const sha = commitFiles(h.gitRoot, app.repo, {
    'server.js': RUNS_APP_JS.replace('Sign up</h1>', `Sign up ${label}</h1>`),
  });
  await requestDeploy(h, app.repo, pr, sha);
  await pollUntil(
    h,
    h.org,
    `/v1/preview/environments/${app.repo}/${pr}`,
    (s) => s.status === 'ready',
    90_000,
  );
  return completedCheckRun(h.dataDir, sha);
}

describe('quarantine routes refuse bad input and change nothing', () => {
  test.each([
    ['no body', undefined, 400, /body/],
    ['no owner', { reason: 'flaky' }, 400, /owner/],
    ['an empty reason', { owner: 'alice', reason: '   ' }, 400, /reason: must not be empty/],
    [
      'an end 40 days ahead',
      { owner: 'alice', reason: 'flaky', until: '2099-01-01' },
      400,
      /at most 30 days/,
    ],
    ['an end in the past', { owner: 'alice', reason: 'flaky', until: '2020-01-01' }, 400, /in the future/],
    [
      'an end that is no date',
      { owner: 'alice', reason: 'flaky', until: 'next week' },
      400,
      /must be a date/,
    ],
  ])('PUT with %s: a 400', async (_what, body, status, message) => {
    const before = await snapshot(h.dataDir);
    const res = await quarantine(failing, body);
    expect(res.status).toBe(status);
    expect(res.body.error).toMatch(message);
    expect(await snapshot(h.dataDir)).toEqual(before);
  });

  test('a test that does not run on previews: 409; unknown and another organization’s tests: 404', async () => {
    const other = await h.newOrg('other');
    const before = await snapshot(h.dataDir);
    const res = await quarantine(plain, { owner: 'alice', reason: 'flaky' });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatch(/only a run_on_preview test/);
    expect((await quarantine('no-such-test', { owner: 'alice', reason: 'flaky' })).status).toBe(404);
    const theirs = await quarantine(failing, { owner: 'mallory', reason: 'mine now' }, other);
    expect(theirs).toMatchObject({ status: 404, body: { error: 'test not found' } });
    const del = await call(h, 'DELETE', `/test/${failing}/quarantine`, { headers: client(other) });
    expect(del.status).toBe(404);
    expect((await call(h, 'DELETE', `/test/${failing}/quarantine`, { headers: client(h.org) })).status).toBe(
      404,
    );
    const list = await call(h, 'GET', '/quarantine?application_id=../x', { headers: client(h.org) });
    expect(list.status).toBe(400);
    expect(await snapshot(h.dataDir)).toEqual(before);
  }, 60_000);
});

describe('previewctl tests quarantine | quarantined | unquarantine', () => {
  test('quarantines with an owner, a reason and an end, lists it, refuses past the cap, ends it', async () => {
    const q = await previewctl(
      h.dataDir,
      'tests',
      'quarantine',
      failing,
      '--owner',
      'alice',
      '--reason',
      'flaky',
    );
    expect(q).toMatchObject({ code: 0, out: { test_id: failing, owner: 'alice', reason: 'flaky' } });
    const refused = await previewctl(
      h.dataDir,
      'tests',
      'quarantine',
      passing,
      '--owner',
      'bob',
      '--reason',
      'x',
    );
    expect(refused.code).not.toBe(0);
    expect(JSON.stringify(refused.out)).toMatch(/at most 1 of this application/);
    const listed = await previewctl(h.dataDir, 'tests', 'quarantined');
    expect(listed.out.quarantined).toEqual([expect.objectContaining({ test_id: failing, owner: 'alice' })]);
    const text = await previewctlRaw(h.dataDir, { PREVIEW_DATA_DIR: h.dataDir }, 'tests', 'quarantined');
    expect(text.stdout).toMatch(/TEST\s+NAME\s+OWNER\s+UNTIL\s+REASON/);
    expect(text.stdout).toContain('Heading fails');
    expect((await previewctl(h.dataDir, 'tests', 'unquarantine', failing)).code).toBe(0);
    expect((await previewctl(h.dataDir, 'tests', 'quarantined')).out.quarantined).toEqual([]);
  }, 60_000);
});

describe('a quarantined test in the merge gate', () => {
  test('its failure leaves the gate green and listed; past the cap a second is refused', async () => {
    const q = await quarantine(failing, { owner: 'alice', reason: 'flaky heading' });
    expect(q.status).toBe(200);
    expect(q.body).toMatchObject({ test_id: failing, owner: 'alice', reason: 'flaky heading' });
    const listed = await call(h, 'GET', '/quarantine', { headers: client(h.org) });
    expect(listed.body.quarantined.map((x: { test_id: string }) => x.test_id)).toEqual([failing]);
    // Two run_on_preview tests: one may be quarantined at once.
    const before = await snapshot(h.dataDir);
    const second = await quarantine(passing, { owner: 'bob', reason: 'just in case' });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatch(/at most 1 of this application's run_on_preview tests/);
    expect(await snapshot(h.dataDir)).toEqual(before);

    const end = await prCheckRun(1, 'quarantined');
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'success' });
    expect(outputOf(end).title).toBe('1 test passed, 1 quarantined failure ignored');
    expect(outputOf(end).summary).toContain('| Heading fails | `failed (quarantined)` |');
    expect(outputOf(end).summary).toMatch(
      /- Heading fails: owner alice, until \d{4}-\d{2}-\d{2}, flaky heading/,
    );
  }, 180_000);

  test('once its end passes, its failure fails the gate again', async () => {
    const until = new Date(Date.now() + 1500).toISOString();
    const q = await quarantine(failing, { owner: 'alice', reason: 'short', until });
    expect(q.status).toBe(200);
    await new Promise((r) => setTimeout(r, 2000));
    expect((await call(h, 'GET', '/quarantine', { headers: client(h.org) })).body.quarantined).toEqual([]);
    const end = await prCheckRun(2, 'ended');
    expect(end.body).toMatchObject({ status: 'completed', conclusion: 'failure' });
    expect(outputOf(end).title).toBe('1 test failed of 2');
  }, 180_000);
});
