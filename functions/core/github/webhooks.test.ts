import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { parseEventFile } from '../../../lib/local/bus.js';
import { sampleEnvironment } from '../../../test/support/environments.js';
import { eventRules } from '../../manifest/events.js';
import { matchesPattern, serviceBusRules } from '../../ports/events/local-bus.js';
import type { DeliveredEvent } from '../../ports/events/port.js';
import { commentMarker, publishToGitHub, versionOf } from '../../ports/pr-status/github-rest.js';
import { githubOutboxPath, OutboxRest } from '../../ports/pr-status/local-outbox.js';
import type { PrReport } from '../../ports/pr-status/port.js';
import { ValidationError } from '../../shared/errors.js';
import { expiryOf } from '../environments/expiry.js';
import { buildReport, ownerTag, renderComment } from '../environments/pr-status.js';
import { normalizeDelivery, redeployRequestedDetail } from './webhooks.js';

/* The pure parts of previews that follow the pull request (issue 13). */

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

const env = sampleEnvironment;

describe('the report on the pull request', () => {
  test('ready: success with the web URL; the comment lists every app', () => {
    const built = buildReport(env());
    if (!('report' in built)) throw new Error('no report');
    expect(built.report).toMatchObject({
      repoFullName: 'acme/shop',
      prNumber: 7,
      sha: SHA,
      environment: 'preview/pr-7',
      state: 'success',
      environmentUrl: 'http://127.0.0.1:4001',
      ownerTag: ownerTag('org-1'),
      version: { generation: 3, at: '2030-01-01T00:01:00.000Z' },
    });
    expect(built.report.comment).toContain('| web | http://127.0.0.1:4001 |');
    expect(built.report.comment).toContain('| api | http://127.0.0.1:4002 |');
    expect(built.report.comment).toContain('`ready`');
    // The tag is a hash: the organization's id never shows on GitHub.
    expect(JSON.stringify(built.report)).not.toContain('org-1');
  });

  test('deploying, failed (with the cause), torn down; a teardown under way reports nothing yet', () => {
    const states = [
      [env({ status: 'building', phase: 'building-images' }), 'in_progress'],
      [env({ status: 'failed', error: 'app web exited (exit code 1)' }), 'failure'],
      [env({ status: 'torn_down', urls: {} }), 'inactive'],
    ] as const;
    for (const [e, state] of states) {
      const built = buildReport(e);
      expect('report' in built && built.report.state).toBe(state);
    }
    const failed = buildReport(env({ status: 'failed', error: 'app web exited (exit code 1)' }));
    expect('report' in failed && failed.report.comment).toContain('app web exited (exit code 1)');
    expect('report' in failed && failed.report.description).toBe(
      'Preview failed: app web exited (exit code 1)',
    );
    expect(buildReport(env({ tornDownRequested: true }))).toEqual({ skip: 'a teardown is in progress' });
    expect(buildReport(env({ inputs: undefined, lastDeployedSha: undefined }))).toEqual({
      skip: 'the environment has no commit yet',
    });
  });

  test('a fork says its preview runs without secret bundles; env 0 gets a deployment but no comment', () => {
    const fork = buildReport(env({ inputs: { headSha: SHA, headRef: 'feature', fork: true } }));
    expect('report' in fork && fork.report.comment).toContain("without the application's secret bundles");
    expect('report' in fork && fork.report.description).toContain('fork: no secret bundles');
    const main = buildReport(
      env({ prNumber: 0, envKey: 'acme/shop#0', inputs: { headSha: SHA, headRef: 'main' } }),
    );
    expect('report' in main && main.report.environment).toBe('preview/main');
    expect('report' in main && main.report.comment).toBeUndefined();
  });

  test('the latest test runs of the environment, when there are any', () => {
    const text = renderComment(env(), 'success', [
      { name: 'checkout | pay', status: 'passed', runId: 'run1', createdAt: '2030-01-01T00:02:00.000Z' },
    ]);
    expect(text).toContain('**Latest test runs**');
    expect(text).toContain('| checkout \\| pay | `passed` | `run1` |');
    expect(renderComment(env(), 'success')).not.toContain('Latest test runs');
  });
});

describe('publishing: a superseded report never overwrites a newer one', () => {
  const dir = mkdtempSync(join(tmpdir(), 'preview-outbox-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const report = (generation: number, at: string, state: PrReport['state'], sha = SHA): PrReport => ({
    repoFullName: 'acme/shop',
    prNumber: 7,
    sha,
    environment: 'preview/pr-7',
    state,
    description: state,
    ownerTag: 'tag',
    comment: `state ${state}, generation ${generation}`,
    version: { generation, at },
  });

  test('one deployment per commit, one comment updated in place, and older reports refused', async () => {
    const rest = new OutboxRest(githubOutboxPath(dir));
    const first = await publishToGitHub(rest, report(1, '2030-01-01T00:00:01Z', 'in_progress'));
    expect(first).toMatchObject({ published: true });
    const second = await publishToGitHub(rest, report(1, '2030-01-01T00:00:02Z', 'success'));
    expect(second).toMatchObject({ published: true });
    if (!first.published || !second.published) throw new Error('not published');
    expect(second.deploymentId).toBe(first.deploymentId);
    expect(second.commentId).toBe(first.commentId);
    // Generation 1's late failure after generation 2's report: refused.
    const newer = await publishToGitHub(rest, report(2, '2030-01-01T00:00:03Z', 'in_progress', BASE));
    expect(newer).toMatchObject({ published: true });
    expect(await publishToGitHub(rest, report(1, '2030-01-01T00:00:04Z', 'failure'))).toEqual({
      published: false,
      reason: 'the pull request already shows a newer status',
    });
    const lines = readFileSync(githubOutboxPath(dir), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { method: string; path: string; body: Record<string, unknown> });
    expect(lines.map((l) => `${l.method} ${l.path}`)).toEqual([
      'POST /repos/acme/shop/deployments',
      `POST /repos/acme/shop/deployments/${first.deploymentId}/statuses`,
      'POST /repos/acme/shop/issues/7/comments',
      `POST /repos/acme/shop/deployments/${first.deploymentId}/statuses`,
      `PATCH /repos/acme/shop/issues/comments/${first.commentId}`,
      'POST /repos/acme/shop/deployments',
      expect.stringMatching(/^POST \/repos\/acme\/shop\/deployments\/\d+\/statuses$/),
      `PATCH /repos/acme/shop/issues/comments/${first.commentId}`,
    ]);
    expect(lines[0]!.body).toMatchObject({
      ref: SHA,
      environment: 'preview/pr-7',
      transient_environment: true,
    });
    const last = lines.at(-1)!.body.body as string;
    expect(last).toContain(commentMarker({ ownerTag: 'tag', repoFullName: 'acme/shop', prNumber: 7 }));
    expect(versionOf(last)).toEqual({ generation: 2, at: '2030-01-01T00:00:03Z' });

    // Read back on a restart: the same comment is updated, not a second one created.
    const again = await publishToGitHub(
      new OutboxRest(githubOutboxPath(dir)),
      report(2, '2030-01-01T00:00:05Z', 'success', BASE),
    );
    expect(again).toMatchObject({ published: true, commentId: first.commentId });
  });

  test('a teardown of a commit that never got a deployment creates none', async () => {
    const rest = new OutboxRest(join(dir, 'other.jsonl'));
    const out = await publishToGitHub(rest, {
      ...report(1, '2030-01-01T00:00:01Z', 'inactive'),
      prNumber: 8,
    });
    expect(out).toEqual({ published: true, deploymentId: undefined, commentId: expect.any(Number) });
  });
});

describe('expiry', () => {
  const at = (iso: string) => new Date(iso);
  test('72 hours after the last deploy, for a settled PR environment', () => {
    expect(expiryOf(env(), 72)).toEqual(at('2030-01-04T00:00:00.000Z'));
    expect(expiryOf(env({ status: 'failed' }), 1)).toEqual(at('2030-01-01T01:00:00.000Z'));
    // Records from before lastDeployAt: their last change.
    expect(expiryOf(env({ lastDeployAt: undefined }), 1)).toEqual(at('2030-01-01T01:01:00.000Z'));
  });
  test('never: ttl 0, the main-branch environment, a deploy in flight, a teardown requested', () => {
    expect(expiryOf(env(), 0)).toBeUndefined();
    expect(expiryOf(env({ prNumber: 0 }), 72)).toBeUndefined();
    for (const status of ['pending', 'building', 'deploying', 'torn_down'] as const)
      expect(expiryOf(env({ status }), 72)).toBeUndefined();
    expect(expiryOf(env({ tornDownRequested: true }), 72)).toBeUndefined();
  });
});
