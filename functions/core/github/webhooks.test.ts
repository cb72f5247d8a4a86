import { describe, expect, test } from '@jest/globals';
import { parseEventFile } from '../../../lib/local/bus.js';
import { eventRules } from '../../manifest/events.js';
import { matchesPattern, serviceBusRules } from '../../ports/events/local-bus.js';
import type { DeliveredEvent } from '../../ports/events/port.js';
import { ValidationError } from '../../shared/errors.js';
import { normalizeDelivery, redeployRequestedDetail } from './webhooks.js';

/* The pure parts of previews that follow the pull request. */

const SHA = 'a'.repeat(40);
const BASE = 'b'.repeat(40);

const pr = (
  action: string,
  over: Record<string, unknown> = {},
  head: unknown = { full_name: 'acme/shop' },
) => ({
  action,
  number: 7,
  pull_request: {
    draft: false,
    merged: false,
    updated_at: '2030-01-01T10:00:00Z',
    head: { sha: SHA, ref: 'feature', repo: head },
    base: { sha: BASE, ref: 'main', repo: { full_name: 'acme/shop' } },
    ...over,
  },
  repository: { full_name: 'acme/shop', default_branch: 'main' },
  installation: { id: 42 },
});

describe('normalizeDelivery', () => {
  test.each(['opened', 'reopened', 'synchronize', 'ready_for_review'])(
    'pull_request %s: deploy the head',
    (action) => {
      expect(normalizeDelivery('pull_request', pr(action))).toEqual({
        kind: 'pullRequestUpdated',
        repoFullName: 'acme/shop',
        installationId: 42,
        prNumber: 7,
        action,
        headSha: SHA,
        headRef: 'feature',
        baseSha: BASE,
        fork: false,
        draft: false,
        eventAt: '2030-01-01T10:00:00Z',
        labels: [],
      });
    },
  );

  test('pull_request closed (merged or not): tear down', () => {
    expect(normalizeDelivery('pull_request', pr('closed', { merged: true }))).toMatchObject({
      kind: 'pullRequestClosed',
      prNumber: 7,
      merged: true,
    });
  });

  test('a fork: the head is another repository (or a deleted one)', () => {
    expect(normalizeDelivery('pull_request', pr('opened', {}, { full_name: 'mallory/shop' }))).toMatchObject({
      fork: true,
    });
    expect(normalizeDelivery('pull_request', pr('opened', {}, null))).toMatchObject({ fork: true });
    // The same repository in another case is not a fork.
    expect(normalizeDelivery('pull_request', pr('opened', {}, { full_name: 'Acme/Shop' }))).toMatchObject({
      fork: false,
    });
  });

  test('a draft is marked as one', () => {
    expect(normalizeDelivery('pull_request', pr('opened', { draft: true }))).toMatchObject({ draft: true });
  });

  // labeled / unlabeled are acted on (the preview rules: test/unit/preview-rules.test.ts).
  test.each(['edited', 'assigned', 'converted_to_draft', 'review_requested'])(
    'pull_request %s is ignored, with the reason',
    (action) => {
      expect(normalizeDelivery('pull_request', pr(action))).toEqual({
        ignored: `pull_request action "${action}" changes no preview`,
      });
    },
  );

  const push = (ref: string, over: Record<string, unknown> = {}) => ({
    ref,
    after: SHA,
    repository: { full_name: 'acme/shop', default_branch: 'main', pushed_at: 1893492000 },
    installation: { id: 42 },
    ...over,
  });

  test('a push to the default branch: redeploy environment 0', () => {
    expect(normalizeDelivery('push', push('refs/heads/main'))).toEqual({
      kind: 'defaultBranchPushed',
      repoFullName: 'acme/shop',
      installationId: 42,
      branch: 'main',
      headSha: SHA,
    });
  });

  test('a push elsewhere, a tag, a deleted branch: ignored', () => {
    expect(normalizeDelivery('push', push('refs/heads/feature'))).toEqual({
      ignored: 'push to feature, not to the default branch main',
    });
    expect(normalizeDelivery('push', push('refs/tags/v1'))).toEqual({
      ignored: 'push of refs/tags/v1, not of a branch',
    });
    expect(normalizeDelivery('push', push('refs/heads/main', { deleted: true }))).toEqual({
      ignored: 'branch main was deleted',
    });
  });

  test('ping and other events: ignored', () => {
    expect(normalizeDelivery('ping', { zen: 'Keep it logically awesome.' })).toEqual({ ignored: 'ping' });
    expect(normalizeDelivery('issues', {})).toEqual({ ignored: 'event "issues" is not acted on' });
  });

  test('a payload lacking what the service reads is a 400 naming the field', () => {
    const bad = pr('opened');
    (bad.pull_request.head as { sha: string }).sha = 'nope';
    expect(() => normalizeDelivery('pull_request', bad)).toThrow(ValidationError);
    expect(() => normalizeDelivery('pull_request', bad)).toThrow(/pull_request\.head\.sha/);
    expect(() => normalizeDelivery('push', { ref: 'refs/heads/main' })).toThrow(/push payload/);
  });
});

describe('the custom redeploy event', () => {
  const base = { orgId: 'org1', repoFullName: 'acme/shop', prNumber: 7 };
  test('whole environment, one app, one app with a mode; env 0 too', () => {
    for (const d of [
      base,
      { ...base, app: 'web' },
      { ...base, app: 'web', mode: 'restart' },
      { ...base, prNumber: 0 },
    ])
      expect(redeployRequestedDetail.safeParse(d).success).toBe(true);
  });
  test('malformed details are refused', () => {
    for (const d of [
      {},
      { ...base, prNumber: -1 },
      { ...base, prNumber: '7' },
      { ...base, repoFullName: 'not a repo' },
      { ...base, app: 'Web_App' },
      { ...base, mode: 'restart' }, // a mode without an app
      { ...base, app: 'web', mode: 'reboot' },
    ])
      expect(redeployRequestedDetail.safeParse(d).success).toBe(false);
  });
});

describe('the event manifest and the local bus agree', () => {
  const event = (
    source: string,
    detailType: string,
    detail: Record<string, unknown> = {},
  ): DeliveredEvent => ({
    version: '0',
    id: '1',
    source,
    'detail-type': detailType,
    account: '000000000000',
    time: '2030-01-01T00:00:00Z',
    region: 'local',
    resources: [],
    detail,
  });

  test('every service-bus rule matches its own events and no other rule’s', () => {
    const rules = serviceBusRules();
    expect(Object.keys(rules).sort()).toEqual([
      'defaultBranchPushed',
      'gateRequested',
      'previewRedeployRequested',
      'pullRequestClosed',
      'pullRequestUpdated',
    ]);
    for (const [id, rule] of Object.entries(rules)) {
      const e = event(rule.pattern.source[0]!, rule.pattern['detail-type'][0]!);
      const matching = Object.entries(rules)
        .filter(([, r]) => matchesPattern(r.pattern, e))
        .map(([other]) => other);
      expect(matching).toEqual([id]);
    }
  });

  test('detail patterns: any of the listed values, nested objects', () => {
    const p = eventRules.imageBuildFinished.pattern;
    const e = (status: string) =>
      event('aws.codebuild', 'CodeBuild Build State Change', { 'build-status': status });
    expect(matchesPattern(p, e('SUCCEEDED'))).toBe(true);
    expect(matchesPattern(p, e('IN_PROGRESS'))).toBe(false);
    expect(
      matchesPattern(
        p,
        event('preview.github', 'CodeBuild Build State Change', { 'build-status': 'FAILED' }),
      ),
    ).toBe(false);
    expect(
      matchesPattern(
        { source: ['s'], 'detail-type': ['d'], detail: { a: { b: [1] } } },
        event('s', 'd', { a: { b: 1 } }),
      ),
    ).toBe(true);
    expect(
      matchesPattern(
        { source: ['s'], 'detail-type': ['d'], detail: { a: { b: [1] } } },
        event('s', 'd', { a: 1 }),
      ),
    ).toBe(false);
  });
});

describe('EVENT.json', () => {
  const detail = { orgId: 'o', repoFullName: 'acme/shop', prNumber: 1 };
  test('an EventBridge event, a PutEvents entry (Detail as text), a list, {"Entries": [...]}', () => {
    const one = { source: 'preview.redeploy', detailType: 'Preview Redeploy Requested', detail };
    expect(
      parseEventFile(JSON.stringify({ source: one.source, 'detail-type': one.detailType, detail })),
    ).toEqual([one]);
    const entry = { Source: one.source, DetailType: one.detailType, Detail: JSON.stringify(detail) };
    expect(parseEventFile(JSON.stringify(entry))).toEqual([one]);
    expect(parseEventFile(JSON.stringify([entry, entry]))).toEqual([one, one]);
    expect(parseEventFile(JSON.stringify({ Entries: [entry] }))).toEqual([one]);
    // What `previewctl events put` leaves in the local inbox.
    expect(parseEventFile(JSON.stringify([one]))).toEqual([one]);
  });
  test('what no bus takes is refused, saying why', () => {
    expect(() => parseEventFile('{')).toThrow('the file is not JSON');
    expect(() => parseEventFile('[]')).toThrow('the file holds no event');
    expect(() => parseEventFile('{"detail-type":"x","detail":{}}')).toThrow('source is required');
    expect(() => parseEventFile('{"source":"x","detail":{}}')).toThrow('detail-type is required');
    expect(() => parseEventFile('{"source":"x","detail-type":"y","detail":[1]}')).toThrow(
      'detail must be a JSON object',
    );
    expect(() => parseEventFile('{"Source":"x","DetailType":"y","Detail":"{"}')).toThrow(
      'Detail is not JSON',
    );
  });
});

describe('what a webhook carries for the rules', () => {
  const payload = (action: string, extra: Record<string, unknown> = {}) => ({
    action,
    number: 7,
    ...extra,
    pull_request: {
      updated_at: '2030-01-01T10:00:00Z',
      labels: [{ name: 'bug' }, { name: 'no-preview' }],
      user: { login: 'dependabot[bot]' },
      head: { sha: 'a'.repeat(40), ref: 'f', repo: { full_name: 'acme/shop' } },
      base: { sha: 'b'.repeat(40), ref: 'main', repo: { full_name: 'acme/shop' } },
    },
    repository: { full_name: 'acme/shop' },
  });

  test('labels, author, and for labeled / unlabeled the label', () => {
    expect(normalizeDelivery('pull_request', payload('synchronize'))).toMatchObject({
      kind: 'pullRequestUpdated',
      labels: ['bug', 'no-preview'],
      author: 'dependabot[bot]',
    });
    expect(
      normalizeDelivery('pull_request', payload('labeled', { label: { name: 'no-preview' } })),
    ).toMatchObject({
      action: 'labeled',
      label: 'no-preview',
    });
    expect(normalizeDelivery('pull_request', payload('unlabeled', { label: { name: 'bug' } }))).toMatchObject(
      {
        action: 'unlabeled',
        label: 'bug',
      },
    );
    // Other actions are still ignored.
    expect(normalizeDelivery('pull_request', payload('assigned'))).toEqual({
      ignored: 'pull_request action "assigned" changes no preview',
    });
  });

  test('labeled without the label it added: a 400 saying so', () => {
    expect(() => normalizeDelivery('pull_request', payload('labeled'))).toThrow(
      'pull_request payload: label is required for the labeled action',
    );
  });

  test('a malformed label list is a 400 naming the field', () => {
    const bad = payload('opened');
    (bad.pull_request as Record<string, unknown>).labels = [{ name: 3 }];
    expect(() => normalizeDelivery('pull_request', bad)).toThrow(/pull_request\.labels\[0\]\.name/);
  });
});
