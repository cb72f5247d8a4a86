import { describe, expect, test } from '@jest/globals';
import { ValidationError } from '../../shared/errors.js';
import { normalizeGateDelivery } from './gate-requests.js';

const SHA = 'a'.repeat(40);
const checkRun = (over: Record<string, unknown> = {}, run: Record<string, unknown> = {}) => ({
  action: 'rerequested',
  check_run: { id: 7, name: 'Preview tests', head_sha: SHA, external_id: '12/1', pull_requests: [], ...run },
  repository: { full_name: 'acme/shop' },
  installation: { id: 3 },
  sender: { login: 'octocat' },
  ...over,
});
const comment = (
  body: string,
  association = 'MEMBER',
  issue: Record<string, unknown> = { pull_request: {} },
) => ({
  action: 'created',
  issue: { number: 12, ...issue },
  comment: { body, author_association: association, user: { login: 'octocat' } },
  repository: { full_name: 'acme/shop' },
});

describe('check_run deliveries', () => {
  test('rerequested re-runs every test of the head; rerun-failed only the failed ones', () => {
    expect(normalizeGateDelivery('check_run', checkRun())).toEqual({
      kind: 'gateRequested',
      repoFullName: 'acme/shop',
      installationId: 3,
      prNumber: 12,
      request: { action: 'rerun', headSha: SHA, by: 'octocat' },
    });
    const failed = normalizeGateDelivery(
      'check_run',
      checkRun({ action: 'requested_action', requested_action: { identifier: 'rerun-failed' } }),
    );
    expect(failed).toMatchObject({ request: { action: 'rerun-failed', headSha: SHA } });
  });

  test('the pull request is read from the external_id the gate writes, and from the earlier `<pr>/<story>`', () => {
    const named = `0123456789ab:acme/shop#31@${SHA}/2`;
    expect(normalizeGateDelivery('check_run', checkRun({}, { external_id: named }))).toMatchObject({
      prNumber: 31,
    });
    expect(normalizeGateDelivery('check_run', checkRun({}, { external_id: '12/3' }))).toMatchObject({
      prNumber: 12,
    });
    // Someone else's external_id names no pull request of ours: GitHub's list is read instead.
    expect(
      normalizeGateDelivery(
        'check_run',
        checkRun({}, { external_id: 'build-31', pull_requests: [{ number: 5 }] }),
      ),
    ).toMatchObject({ prNumber: 5 });
  });

  test('another check run, another action or button, or no pull request: ignored', () => {
    expect(normalizeGateDelivery('check_run', checkRun({}, { name: 'CI' }))).toEqual({
      ignored: 'check run "CI" is not the merge gate\'s',
    });
    expect(normalizeGateDelivery('check_run', checkRun({ action: 'completed' }))).toHaveProperty('ignored');
    expect(
      normalizeGateDelivery(
        'check_run',
        checkRun({ action: 'requested_action', requested_action: { identifier: 'deploy' } }),
      ),
    ).toHaveProperty('ignored');
    expect(normalizeGateDelivery('check_run', checkRun({}, { external_id: null }))).toEqual({
      ignored: 'the check run names no pull request',
    });
  });

  test('a payload lacking what is read is a 400 naming the field', () => {
    expect(() => normalizeGateDelivery('check_run', checkRun({}, { head_sha: 'nope' }))).toThrow(
      ValidationError,
    );
    expect(() => normalizeGateDelivery('check_run', checkRun({}, { head_sha: 'nope' }))).toThrow(/head_sha/);
    expect(() => normalizeGateDelivery('check_run', { action: 'rerequested' })).toThrow(/check_run/);
  });
});

describe('issue_comment deliveries', () => {
  test('/preview skip-tests with a reason from a trusted author', () => {
    for (const association of ['OWNER', 'MEMBER', 'COLLABORATOR'])
      expect(
        normalizeGateDelivery('issue_comment', comment('/preview skip-tests docs only\nmore', association)),
      ).toEqual({
        kind: 'gateRequested',
        repoFullName: 'acme/shop',
        prNumber: 12,
        request: { action: 'skip', by: 'octocat', reason: 'docs only' },
      });
  });

  test('an empty reason is passed on (refused by a reply), anyone else is ignored, other comments too', () => {
    expect(normalizeGateDelivery('issue_comment', comment('/preview skip-tests'))).toMatchObject({
      request: { action: 'skip', reason: '' },
    });
    expect(normalizeGateDelivery('issue_comment', comment('/preview skip-tests x', 'CONTRIBUTOR'))).toEqual({
      ignored: 'octocat (CONTRIBUTOR) may not skip the tests: only an owner, member or collaborator may',
    });
    expect(normalizeGateDelivery('issue_comment', comment('looks good'))).toHaveProperty('ignored');
    expect(normalizeGateDelivery('issue_comment', comment('/preview skip-testsfoo'))).toHaveProperty(
      'ignored',
    );
    expect(normalizeGateDelivery('issue_comment', comment('/preview skip-tests x', 'MEMBER', {}))).toEqual({
      ignored: 'the comment is on an issue, not a pull request',
    });
    expect(normalizeGateDelivery('issue_comment', { ...comment('x'), action: 'edited' })).toHaveProperty(
      'ignored',
    );
  });

  test('a malformed comment is a 400', () => {
    expect(() =>
      normalizeGateDelivery('issue_comment', { ...comment('/preview skip-tests x'), comment: { body: 'x' } }),
    ).toThrow(ValidationError);
  });
});
