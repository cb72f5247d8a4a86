import { describe, expect, test } from '@jest/globals';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl, previewctlRaw } from '../../support/process.js';
import { recordedStep, runEnded, signUpBeforeRename } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';

/*
 * `previewctl tests heal --run RUN_ID` against the running server: a passed run's healed selectors (and
 * the elements' outer HTML) shown as a diff against its test's steps, written with `--write`; the next
 * run of the test needs no healing. Only a passed run's heals are kept; another organization's run is
 * not found; a test changed since the run keeps its own selectors; a secret value stays masked.
 */

const h = localServerForFile();
const app = runsAppForFile(h);
const SECRET_EMAIL = 'keep-heal-secret-5c1e@example.com';

/** The fixture's sign-up page, recorded before it renamed its ids. */
const oldSteps = [
  ...signUpBeforeRename,
  recordedStep('assert-text', 'The page says "Welcome, {{variable:EMAIL}}"', '#greeting', ''),
];

const run = async (testId: string) => runEnded(h, (await startRun(h, testId)).run_id, 120_000);
const stepsOf = async (testId: string) =>
  (await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(h.org) })).body.steps;
const heal = (...args: string[]) => previewctl(h.dataDir, 'tests', 'heal', '--org', h.org.orgId, ...args);

describe('previewctl tests heal', () => {
  let testId: string;
  let healed: any;

  test('shows the diff first and changes nothing; --write keeps the heals; the next run needs no healing', async () => {
    testId = await app.importTest({
      variables: { EMAIL: SECRET_EMAIL },
      secret_variables: ['EMAIL'],
      steps: oldSteps,
    });
    healed = await run(testId);
    expect([healed.status, healed.healed_steps]).toEqual(['passed', 2]);
    const before = await stepsOf(testId);

    const diff = await heal('--run', healed.id);
    expect(diff.code).toBe(0);
    expect(diff.out).toMatchObject({ runId: healed.id, testId, written: false, skipped: [] });
    expect(diff.out.changes.map((c: any) => [c.step, c.interaction, c.from.selector, c.to.selector])).toEqual(
      [
        [2, 'input-text', '#user-email', 'role=textbox[name="Email"]'],
        [3, 'click', '#signup-button', 'role=button[name="Sign up"]'],
      ],
    );
    // The element's outer HTML as it was when healed, in place of the recorded one.
    expect(diff.out.changes[1].to.html).toMatch(/^<button[^>]*>Sign up<\/button>$/);
    expect(diff.out.changes[1].to.html).not.toContain('signup-button');
    expect(await stepsOf(testId)).toEqual(before);

    // The same as a person reads it: old lines `-`, new lines `+`, and how to write them.
    const human = await previewctlRaw(
      h.dataDir,
      { PREVIEW_DATA_DIR: h.dataDir },
      'tests',
      'heal',
      '--org',
      h.org.orgId,
      '--run',
      healed.id,
    );
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('step 2 (input-text), healed at ');
    expect(human.stdout).toContain('- selector: #user-email\n+ selector: role=textbox[name="Email"]\n');
    expect(human.stdout).toContain(
      '- html: <button id="signup-button" type="submit">Sign up</button>\n+ html: <button',
    );
    expect(human.stdout).toContain('not written: run again with --write to keep these');

    const written = await heal('--run', healed.id, '--write');
    expect([written.code, written.out.written, written.out.changes.length]).toEqual([0, true, 2]);
    const after = await stepsOf(testId);
    expect(after.map((s: any) => s.element?.selector)).toEqual([
      before[0].element?.selector,
      'role=textbox[name="Email"]',
      'role=button[name="Sign up"]',
      '#greeting',
    ]);
    expect(after[2].element.html).toBe(diff.out.changes[1].to.html);
    // Only the elements changed: ids, instructions and interactions are the test's own.
    expect(after.map((s: any) => [s.id, s.instruction, s.interaction])).toEqual(
      before.map((s: any) => [s.id, s.instruction, s.interaction]),
    );
    expect(JSON.stringify(after)).not.toContain(SECRET_EMAIL);

    const next = await run(testId);
    expect([next.status, next.healed_steps]).toEqual(['passed', undefined]);
    expect(next.steps.map((s: any) => [s.status, s.healed, /^healed/.test(s.output)])).toEqual(
      next.steps.map(() => ['passed', undefined, false]),
    );
    // Nothing healed: nothing to write.
    const none = await heal('--run', next.id);
    expect([none.code, none.out.changes, none.out.written]).toEqual([0, [], false]);
    // The first run's heals again: the test's selectors changed since, so each is skipped, nothing written.
    const again = await heal('--run', healed.id, '--write');
    expect([again.code, again.out.written, again.out.changes]).toEqual([0, false, []]);
    expect(again.out.skipped.map((s: any) => [s.step, s.reason])).toEqual([
      [2, `the test's selector is "role=textbox[name=\\"Email\\"]" now, not the one healed`],
      [3, `the test's selector is "role=button[name=\\"Sign up\\"]" now, not the one healed`],
    ]);
    expect(await stepsOf(testId)).toEqual(after);
  }, 300_000);

  test("bad input: no --run, an unknown run, another organization's run, a failed run: refused, nothing written", async () => {
    const before = await stepsOf(testId);
    const missing = await heal();
    expect([missing.code, missing.out.error]).toEqual([2, '--run is required']);
    const unknown = await heal('--run', 'run_nope', '--write');
    expect([unknown.code, unknown.out.error]).toEqual([1, 'run not found']);
    const other = await h.newOrg('keep-heals-other');
    const theirs = await previewctl(
      h.dataDir,
      'tests',
      'heal',
      '--org',
      other.orgId,
      '--run',
      healed.id,
      '--write',
    );
    expect([theirs.code, theirs.out.error]).toEqual([1, 'run not found']);
    const failedTest = await app.importTest({
      variables: { EMAIL: SECRET_EMAIL },
      secret_variables: ['EMAIL'],
      steps: oldSteps,
      heal: false,
    });
    const failed = await run(failedTest);
    expect(failed.status).toBe('failed');
    const refused = await heal('--run', failed.id, '--write');
    expect([refused.code, refused.out.error]).toEqual([
      1,
      `run ${failed.id} is failed: heals are kept only from a passed run (its healed steps led to a pass)`,
    ]);
    expect(await stepsOf(testId)).toEqual(before);
  }, 240_000);
});
