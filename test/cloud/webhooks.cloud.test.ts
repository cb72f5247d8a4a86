import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { findEnvironment } from '../../functions/core/environments/lifecycle.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bearer, call } from '../support/api.js';
import { deliver, prPayload, pushPayload } from '../support/webhooks.js';
import type { Cloud } from './cloud-tier.js';
import { asDelivered, bridgeEvent, type PutEventsEntry } from './fakes/aws.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * Previews that follow the pull request, in the cloud simulation tier: the webhook handler in
 * PREVIEW_MODE=aws reads its secret from the GitHub App secret (Secrets Manager), checks the event's
 * installation against GitHub's, and publishes to the service's bus through the EventBridge endpoint
 * (the AWS fake records PutEvents). The recorded event, handed to the rule's target as EventBridge would,
 * starts the deploy state machine.
 */

const APP_ID = '515151';
const INSTALLATION = 7;
const HOOK_SECRET = 'hook-secret';
const BUS = 'preview-events';

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let sha: string;
const logs: string[] = [];

beforeAll(async () => {
  setLogSink((line) => logs.push(line));
  ({ cloud, github, org, sha } = await startGitHubApp(
    'cloud-hooks',
    { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n' },
    {
      env: { EVENT_BUS_NAME: BUS },
      appId: APP_ID,
      installationId: INSTALLATION,
      webhookSecret: HOOK_SECRET,
      otherRepos: ['acme/other'],
    },
  ));
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const entries = () => cloud.aws.events as PutEventsEntry[];

describe('the webhook handler in AWS mode', () => {
  let accepted: Awaited<ReturnType<typeof deliver>>;

  test('a signed pull_request delivery is published to the service bus, one event per acting org', async () => {
    accepted = await deliver(
      cloud,
      HOOK_SECRET,
      'pull_request',
      prPayload('opened', { number: 7, sha, installationId: INSTALLATION }),
    );
    expect(accepted.status).toBe(202);
    expect(accepted.body).toEqual({ accepted: true, deliveryId: accepted.deliveryId, events: 1 });
    expect(cloud.aws.calls).toContain('EventBridge.PutEvents');
    expect(entries()).toEqual([
      {
        EventBusName: BUS,
        Source: 'preview.github',
        DetailType: 'Pull Request Updated',
        Detail: expect.any(String),
      },
    ]);
    expect(JSON.parse(entries()[0]!.Detail)).toEqual({
      orgId: org.orgId,
      repoFullName: 'acme/shop',
      deliveryId: accepted.deliveryId,
      prNumber: 7,
      headSha: sha,
      headRef: 'feature-7',
      baseSha: sha,
      fork: false,
      eventAt: expect.any(String),
      // What the preview rules read, and their verdict (test/cloud/preview-rules.cloud.test.ts).
      labels: [],
      verdict: { preview: true },
    });
    // The installation was checked against GitHub's.
    expect(github.calls()).toContain('GET /repos/acme/shop/installation');
  });

  test('a redelivery publishes nothing', async () => {
    const before = entries().length;
    const again = await deliver(
      cloud,
      HOOK_SECRET,
      'pull_request',
      prPayload('opened', { number: 7, sha, installationId: INSTALLATION }),
      { id: accepted.deliveryId },
    );
    expect(again.body).toEqual({ ignored: `delivery ${accepted.deliveryId} was already received` });
    expect(entries()).toHaveLength(before);
  });

  test('a wrong signature: 401, nothing published', async () => {
    const before = entries().length;
    const res = await deliver(cloud, HOOK_SECRET, 'pull_request', prPayload('opened', { number: 8, sha }), {
      secret: 'not-the-app-secret',
    });
    expect(res.status).toBe(401);
    expect(entries()).toHaveLength(before);
  });

  test('an installation that is not the one covering the repository: ignored', async () => {
    const res = await deliver(
      cloud,
      HOOK_SECRET,
      'push',
      pushPayload('main', sha, 'acme/shop', INSTALLATION + 1),
    );
    expect(res.body).toEqual({ ignored: `installation ${INSTALLATION + 1} does not cover acme/shop` });
  });

  test('a push to the default branch: Default Branch Pushed', async () => {
    const res = await deliver(
      cloud,
      HOOK_SECRET,
      'push',
      pushPayload('main', sha, 'acme/shop', INSTALLATION),
    );
    expect(res.body).toMatchObject({ accepted: true, events: 1 });
    expect(entries().at(-1)).toMatchObject({ DetailType: 'Default Branch Pushed', EventBusName: BUS });
  });
});

describe('the rule targets in AWS mode', () => {
  test('Pull Request Updated, as EventBridge delivers it, starts the deploy state machine', async () => {
    const entry = entries().find((e) => e.DetailType === 'Pull Request Updated')!;
    const out = await cloud.invoke<{ outcome: string }>(
      'functions/events/pull-request-updated.ts',
      asDelivered(entry),
    );
    expect(out).toEqual({ outcome: 'deploy requested' });
    expect(cloud.aws.calls).toContain('SFN.StartExecution');
    const res = await call(cloud, 'GET', '/v1/preview/environments/acme/shop/7', { headers: bearer(org) });
    expect(res.status).toBe(200);
    expect(res.body.repoFullName).toBe('acme/shop');
  });

  test('a malformed event fails the invocation (toward the on-failure destination), logged with its reason', async () => {
    const entry = entries().find((e) => e.DetailType === 'Pull Request Updated')!;
    const bad = asDelivered(entry);
    delete (bad.detail as Record<string, unknown>).headSha;
    const err = await cloud.invoke('functions/events/pull-request-updated.ts', bad).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'MalformedEvent' });
    expect(logs.some((l) => l.includes('"malformed event"') && l.includes('headSha'))).toBe(true);
  });
});

describe('two updates of a pull request in the same second, in AWS mode', () => {
  const AT = '2031-06-01T12:00:00Z';
  /** Pull Request Updated for PR 21 at head `headSha`, stamped `AT`, as EventBridge delivers it. */
  const updated = (headSha: string) =>
    bridgeEvent(
      'Pull Request Updated',
      'preview.github',
      {
        orgId: org.orgId,
        repoFullName: 'acme/shop',
        prNumber: 21,
        headSha,
        headRef: 'feature-21',
        fork: false,
        eventAt: AT,
      },
      `evt-${headSha.slice(0, 8)}`,
    );
  const act = (headSha: string) =>
    cloud.invoke<{ outcome: string }>('functions/events/pull-request-updated.ts', updated(headSha));
  const pullReads = () => github.calls().filter((c) => c === 'GET /repos/acme/shop/pulls/21').length;

  test("the newer head wins the tie: GitHub's pull request says which, asked only on a tie", async () => {
    const a = github.addCommit('acme/shop', { 'preview.yaml': 'apps: {}\n' });
    const b = github.addCommit('acme/shop', { 'preview.yaml': 'apps: {}\n' });
    github.setPull('acme/shop', 21, { headSha: b, headRef: 'feature-21' });

    expect(await act(a)).toEqual({ outcome: 'deploy requested' });
    expect(pullReads()).toBe(0);
    const first = (await findEnvironment(org.orgId, 'acme/shop#21'))!;
    expect(first.inputs?.headSha).toBe(a);

    // Today's bug: this one was taken as already seen, and the preview stayed at A.
    expect(await act(b)).toEqual({ outcome: 'deploy requested' });
    expect(pullReads()).toBe(1);
    const second = (await findEnvironment(org.orgId, 'acme/shop#21'))!;
    expect(second).toMatchObject({
      inputs: { headSha: b },
      sourceEventAt: AT,
      generation: first.generation + 1,
    });

    // A again (EventBridge delivers at least once): not the head now, stale.
    expect(await act(a)).toEqual({ outcome: 'stale' });
    expect(pullReads()).toBe(2);
    // B again: the same head as recorded, a no-op without asking GitHub.
    expect(await act(b)).toEqual({ outcome: 'stale' });
    expect(pullReads()).toBe(2);
    expect((await findEnvironment(org.orgId, 'acme/shop#21'))!).toMatchObject({
      inputs: { headSha: b },
      generation: second.generation,
    });
  });

  test('a close of the same second wins, even against a newer head, without asking GitHub', async () => {
    const closed = await cloud.invoke<{ outcome: string }>('functions/events/pull-request-closed.ts', {
      ...updated('0'.repeat(40)),
      'detail-type': 'Pull Request Closed',
      detail: { orgId: org.orgId, repoFullName: 'acme/shop', prNumber: 21, merged: false, eventAt: AT },
    });
    expect(closed).toEqual({ outcome: 'teardown requested' });
    const c = github.addCommit('acme/shop', { 'preview.yaml': 'apps: {}\n' });
    github.setPull('acme/shop', 21, { headSha: c, headRef: 'feature-21' });
    const reads = pullReads();
    expect(await act(c)).toEqual({ outcome: 'stale' });
    expect(pullReads()).toBe(reads);
    expect((await findEnvironment(org.orgId, 'acme/shop#21'))!).toMatchObject({
      tornDownRequested: true,
      sourceEventAt: `${AT}|closed`,
    });
  });
});
