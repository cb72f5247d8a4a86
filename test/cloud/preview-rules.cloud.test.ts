import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type OrgCredentials, updateApplication } from '../../functions/core/applications/applications.js';
import { findEnvironment } from '../../functions/core/environments/lifecycle.js';
import { setLogSink } from '../../functions/shared/log.js';
import { deliver, prPayload } from '../support/webhooks.js';
import type { Cloud } from './cloud-tier.js';
import { asDelivered, type PutEventsEntry } from './fakes/aws.js';
import type { FakeGitHub } from './fakes/github.js';
import { startGitHubApp, stopGitHubCloud } from './github-cloud.js';

/*
 * An application's `paths` rule in the cloud simulation tier: the webhook handler in
 * PREVIEW_MODE=aws lists the pull request's files through the GitHub App (`GET …/pulls/{n}/files`, page
 * after page, on the fake GitHub), answers `{"ignored": reason}` when none matches, publishes the verdict
 * otherwise, and a pull request that stops matching has its preview torn down by the rule's target.
 */

const APP_ID = '626262';
const INSTALLATION = 9;
const HOOK_SECRET = 'rules-secret';
const BUS = 'preview-events';
const BASE = { 'preview.yaml': 'apps:\n  web:\n    port: 3000\n', 'web/index.html': 'v0' };

let cloud: Cloud;
let github: FakeGitHub;
let org: OrgCredentials;
let base: string;

beforeAll(async () => {
  setLogSink(() => undefined);
  let applicationId: string;
  ({
    cloud,
    github,
    org,
    sha: base,
    applicationId,
  } = await startGitHubApp('cloud-rules', BASE, {
    env: { EVENT_BUS_NAME: BUS },
    appId: APP_ID,
    installationId: INSTALLATION,
    webhookSecret: HOOK_SECRET,
  }));
  await updateApplication(org.orgId, applicationId, { paths: ['web/**'] });
}, 60_000);
afterAll(() => stopGitHubCloud({ cloud, github }), 30_000);

const entries = () => cloud.aws.events as PutEventsEntry[];
/** A pull request of acme/shop whose head is the base plus `changed`. */
function openPull(number: number, changed: Record<string, string>): string {
  const head = github.addCommit('acme/shop', { ...BASE, ...changed });
  github.setPull('acme/shop', number, { headSha: head, headRef: `feature-${number}`, baseSha: base });
  return head;
}
const send = (action: string, number: number, sha: string) =>
  deliver(
    cloud,
    HOOK_SECRET,
    'pull_request',
    prPayload(action, { number, sha, baseSha: base, installationId: INSTALLATION }),
  );
const filesCalls = (n: number) => github.calls().filter((c) => c === `GET /repos/acme/shop/pulls/${n}/files`);
/** Documentation files only: `count` of them, all outside web/. */
const docs = (count: number) =>
  Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`docs/page-${String(i).padStart(4, '0')}.md`, 'x']),
  );

describe('the paths rule through the GitHub App', () => {
  test('no changed file under web/ (250 files, three pages): 202 {"ignored": reason}, nothing published', async () => {
    const head = openPull(31, docs(250));
    const before = entries().length;
    const res = await send('opened', 31, head);
    expect([res.status, res.body]).toEqual([
      202,
      { ignored: 'the pull request changes no file matching web/**' },
    ]);
    expect(filesCalls(31)).toHaveLength(3);
    expect(entries()).toHaveLength(before);
  });

  test('a change under web/ on the last page: published with its verdict', async () => {
    const head = openPull(32, { ...docs(250), 'web/index.html': 'v1' });
    const res = await send('opened', 32, head);
    expect(res.body).toMatchObject({ accepted: true, events: 1 });
    expect(filesCalls(32)).toHaveLength(3);
    expect(JSON.parse(entries().at(-1)!.Detail)).toMatchObject({
      prNumber: 32,
      headSha: head,
      verdict: { preview: true },
    });
  });

  test('more files than GitHub lists (3,000): the rule cannot say, so it does not skip', async () => {
    const head = openPull(33, docs(3_001));
    const res = await send('opened', 33, head);
    expect(res.body).toMatchObject({ accepted: true, events: 1 });
    expect(filesCalls(33)).toHaveLength(30);
  }, 30_000);

  test('a push that leaves web/ untouched tears the preview down, the reason kept for the PR', async () => {
    const act = () =>
      cloud.invoke<{ outcome: string }>(
        'functions/events/pull-request-updated.ts',
        asDelivered(entries().at(-1)!, `evt-${entries().length - 1}`),
      );

    const web = openPull(34, { 'web/index.html': 'v2' });
    expect((await send('opened', 34, web)).body).toMatchObject({ accepted: true, events: 1 });
    expect(await act()).toEqual({ outcome: 'deploy requested' });

    // Force-pushed to a head that touches only docs: the preview exists, so the verdict is published.
    const docsOnly = openPull(34, docs(2));
    const pushed = await send('synchronize', 34, docsOnly);
    expect(pushed.body).toMatchObject({ accepted: true, events: 1 });
    const reason = 'the pull request changes no file matching web/**';
    expect(JSON.parse(entries().at(-1)!.Detail)).toMatchObject({ verdict: { preview: false, reason } });
    const starts = cloud.aws.calls.filter((c) => c === 'SFN.StartExecution').length;
    expect(await act()).toEqual({ outcome: `teardown requested: ${reason}` });
    expect(cloud.aws.calls.filter((c) => c === 'SFN.StartExecution')).toHaveLength(starts + 1);
    expect(await findEnvironment(org.orgId, 'acme/shop#34')).toMatchObject({
      tornDownRequested: true,
      teardownReason: reason,
    });
    // Another push while it stays outside web/: nothing left to tear down.
    const again = await send('synchronize', 34, openPull(34, docs(3)));
    expect(again.body).toEqual({ ignored: reason });
  }, 60_000);
});
