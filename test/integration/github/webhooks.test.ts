import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, updateApplication } from '../../../functions/core/applications/applications.js';
import { findEnvironment } from '../../../functions/core/environments/lifecycle.js';
import { reportStatus } from '../../../functions/core/environments/pr-status.js';
import { prStatus } from '../../../functions/ports/registry.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { webhookStartupLines } from '../../../lib/local/server.js';
import { bearer, call } from '../../support/api.js';
import { type Status as AppStatus, hit, pollUntil, SERVER_JS, settled } from '../../support/apps.js';
import { commitFiles, makeRepo, setBranch } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import {
  deliver,
  deploymentStates,
  lastComment,
  outbox,
  prPayload,
  pushPayload,
  sign,
} from '../../support/webhooks.js';

/** An environment's status as GET answers it (the fields these tests read). */
type Status = AppStatus & { updatedAt: string; fork?: true };
/*
 * Previews that follow the pull request, locally: signed GitHub deliveries to the very server
 * `npm start` runs, the in-process bus delivering their events to the same handlers as EventBridge's
 * rules, the deploy pipeline running for real, and what GitHub would be told appended to the outbox.
 */

const h = localServerForFile();
let secret: string;
let auth: Record<string, string>;
let sha1: string;

const YAML = `apps:
  web:
    port: 3000
    command: node server.js web
    health: /healthz
    env: { SHOW: "API_TOKEN" }
`;
const files = (version: string, yaml = YAML) => ({
  'preview.yaml': yaml,
  'server.js': SERVER_JS,
  VERSION: version,
});
const path = (pr: number, repo = 'acme/shop') => `/v1/preview/environments/${repo}/${pr}`;
/** Everything the last deliveries set off has run: the bus's deliveries, then the state machines. */
async function settle() {
  await h.service.bus.idle();
  await h.service.workflows.idle();
  await h.service.bus.idle();
}
const status = async (pr: number, done: (s: Status) => boolean = settled, repo?: string): Promise<Status> =>
  (await pollUntil(h, h.org, path(pr, repo), (s) => done(s as Status), 30_000)) as Status;
const send = (event: string, payload: unknown, opts = {}) => deliver(h, secret, event, payload, opts);

beforeAll(async () => {
  sha1 = makeRepo(h.gitRoot, 'acme/shop', files('v1'));
  auth = bearer(h.org);
  secret = readFileSync(join(h.dataDir, 'github-webhook-secret'), 'utf8').trim();
  const app = await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/shop' });
  const put = await call(h, 'PUT', `/v1/preview/secrets/${app.applicationId}/web/API_TOKEN`, {
    body: { value: 'tok-secret' },
    headers: auth,
  });
  expect(put.status).toBe(200);
}, 60_000);

describe('the local server', () => {
  test('generated the webhook secret on first start (0600) and says where it is', () => {
    const file = join(h.dataDir, 'github-webhook-secret');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(h.service.webhookSecret).toEqual({ from: 'file', path: file, created: true });
    const lines = webhookStartupLines(h.service);
    expect(lines[0]).toBe(
      `  webhooks:    POST ${h.url}/v1/github/webhooks (GitHub App webhook; secret: ${file} (mode 0600, generated now))`,
    );
    expect(lines[1]).toContain('previewctl events put --file EVENT.json');
  });
});

describe('the signature', () => {
  const ping = { zen: 'Design for failure.', hook_id: 1 };

  test('a delivery signed with the secret is accepted', async () => {
    const res = await send('ping', ping);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ ignored: 'ping' });
  });

  test.each([
    ['a missing signature', { signature: null }],
    ['a wrong secret', { secret: 'not-the-secret' }],
    ['a tampered body', { sentBody: JSON.stringify({ ...ping, zen: 'Tampered.' }) }],
    ['a malformed header', { signature: 'sha256=abc' }],
    ['a SHA-1 signature', { signature: `sha1=${'0'.repeat(40)}` }],
  ])('401 for %s, whatever the body', async (_name, opts) => {
    const res = await send('ping', ping, opts);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      error:
        "missing or invalid X-Hub-Signature-256: this route takes GitHub's signature of the body under the GitHub App's webhook secret",
    });
  });

  test('the signature is checked before the body is parsed: an unsigned non-JSON body is a 401, not a 400', async () => {
    const unsigned = await call(h, 'POST', '/v1/github/webhooks', {
      body: '{not json',
      headers: { 'x-github-event': 'ping', 'x-github-delivery': 'd-1' },
    });
    expect(unsigned.status).toBe(401);
    const signed = await call(h, 'POST', '/v1/github/webhooks', {
      body: '{not json',
      headers: {
        'x-github-event': 'ping',
        'x-github-delivery': 'd-1',
        'x-hub-signature-256': sign(secret, '{not json'),
      },
    });
    expect(signed.status).toBe(400);
    expect(signed.body).toEqual({ error: 'request body is not valid JSON' });
  });

  test('API credentials are no way in', async () => {
    const res = await call(h, 'POST', '/v1/github/webhooks', { body: ping, headers: auth });
    expect(res.status).toBe(401);
  });
});

describe('what the webhook does not act on: 202 {"ignored": reason}', () => {
  test('a repository no application links', async () => {
    const res = await send(
      'pull_request',
      prPayload('opened', { number: 1, sha: sha1, repo: 'acme/unlinked' }),
    );
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ ignored: 'no application links acme/unlinked' });
  });

  test('events and actions that change no preview', async () => {
    expect((await send('issues', { action: 'opened' })).body).toEqual({
      ignored: 'event "issues" is not acted on',
    });
    // labeled / unlabeled are acted on since the preview rules (github/preview-rules.test.ts).
    expect((await send('pull_request', prPayload('assigned', { number: 1, sha: sha1 }))).body).toEqual({
      ignored: 'pull_request action "assigned" changes no preview',
    });
  });

  test('a delivery without X-GitHub-Delivery, or a payload without what is read: 400 naming it', async () => {
    const body = JSON.stringify(prPayload('opened', { number: 1, sha: sha1 }));
    const res = await call(h, 'POST', '/v1/github/webhooks', {
      body,
      headers: { 'x-github-event': 'pull_request', 'x-hub-signature-256': sign(secret, body) },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/X-GitHub-Delivery/);
    const bad = await send('pull_request', {
      ...prPayload('opened', { number: 1, sha: sha1 }),
      number: 'one',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe(
      'invalid pull_request payload: number: Invalid input: expected number, received string',
    );
  });
});

describe('a pull request, start to end', () => {
  let opened: Awaited<ReturnType<typeof send>>;
  let first: Status;

  test('opened: 202 at once, then a preview of its head; the PR shows in_progress, then success with the URL', async () => {
    const started = Date.now();
    opened = await send('pull_request', prPayload('opened', { number: 1, sha: sha1 }));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(opened.status).toBe(202);
    expect(opened.body).toEqual({ accepted: true, deliveryId: opened.deliveryId, events: 1 });
    await settle();
    first = await status(1);
    expect(first).toMatchObject({ status: 'ready', lastDeployedSha: sha1 });
    expect((await hit(first.urls.web!)).env).toEqual({ API_TOKEN: 'tok-secret' });

    const calls = outbox(h.dataDir);
    const deployment = calls.find((c) => c.path === '/repos/acme/shop/deployments');
    expect(deployment?.body).toMatchObject({
      ref: sha1,
      environment: 'preview/pr-1',
      transient_environment: true,
      production_environment: false,
      required_contexts: [],
    });
    const states = deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-1');
    expect(states[0]!.state).toBe('in_progress');
    expect(states.at(-1)).toEqual({
      state: 'success',
      body: expect.objectContaining({ environment_url: first.urls.web, environment: 'preview/pr-1' }),
    });
    const comment = lastComment(h.dataDir, 'acme/shop', 1)!;
    expect(comment).toContain('### Preview environment: ready');
    expect(comment).toContain(`| web | ${first.urls.web} |`);
    expect(comment).toContain(sha1.slice(0, 12));
    // One comment, created once and updated in place.
    expect(calls.filter((c) => c.path === '/repos/acme/shop/issues/1/comments')).toHaveLength(1);
  });

  test('a redelivery changes nothing', async () => {
    const executions = h.service.workflows.executions.size;
    const again = await send('pull_request', prPayload('opened', { number: 1, sha: sha1 }), {
      id: opened.deliveryId,
    });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ ignored: `delivery ${opened.deliveryId} was already received` });
    await settle();
    expect(h.service.workflows.executions.size).toBe(executions);
    expect(await status(1)).toMatchObject({
      status: 'ready',
      lastDeployedSha: sha1,
      updatedAt: first.updatedAt,
    });
  });

  test('the bus delivers an event twice (EventBridge: at least once): acted on once', async () => {
    const executions = h.service.workflows.executions.size;
    const delivered = h.service.bus.deliveries.filter((d) => d.rule === 'pullRequestUpdated').length;
    const env = await findEnvironment(h.org.orgId, 'acme/shop#1');
    // The event the webhook put for `opened`, put again twice at once (the same `updated_at`).
    const again = {
      source: 'preview.github',
      detailType: 'Pull Request Updated',
      detail: {
        orgId: h.org.orgId,
        repoFullName: 'acme/shop',
        prNumber: 1,
        headSha: sha1,
        headRef: 'feature',
        fork: false,
        eventAt: env!.sourceEventAt!,
        deliveryId: opened.deliveryId,
      },
    };
    await h.service.bus.put([again, again]);
    await settle();
    const outcomes = h.service.bus.deliveries
      .filter((d) => d.rule === 'pullRequestUpdated')
      .slice(delivered)
      .map((d) => (d as { result?: { outcome?: string } }).result?.outcome);
    expect(outcomes).toEqual(['stale', 'stale']);
    expect(h.service.workflows.executions.size).toBe(executions);
    expect(await findEnvironment(h.org.orgId, 'acme/shop#1')).toMatchObject({
      generation: env!.generation,
      status: 'ready',
    });
  });

  test('synchronize: the new head is deployed', async () => {
    const sha2 = commitFiles(h.gitRoot, 'acme/shop', files('v2'));
    expect((await send('pull_request', prPayload('synchronize', { number: 1, sha: sha2 }))).status).toBe(202);
    await settle();
    const s = await status(1, (x) => x.lastDeployedSha === sha2 && settled(x));
    expect(s.status).toBe('ready');
    expect((await hit(s.urls.web!)).version).toBe('v2');
    expect(deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-1').at(-1)?.state).toBe('success');
    // A deployment per commit: two now.
    expect(
      outbox(h.dataDir).filter(
        (c) => c.path === '/repos/acme/shop/deployments' && c.body.environment === 'preview/pr-1',
      ),
    ).toHaveLength(2);
  });

  test('closed: torn down; the PR shows it inactive', async () => {
    const { urls } = await status(1);
    expect(
      (await send('pull_request', prPayload('closed', { number: 1, sha: sha1, merged: true }))).status,
    ).toBe(202);
    await settle();
    const down = await status(1, (s) => s.status === 'torn_down');
    expect(down.urls).toEqual({});
    expect(await hit(urls.web!)).toBeUndefined();
    expect(deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-1').at(-1)).toEqual({
      state: 'inactive',
      body: expect.objectContaining({ description: 'Preview torn down' }),
    });
    expect(lastComment(h.dataDir, 'acme/shop', 1)).toContain('### Preview environment: torn down');
  });

  test('a push that arrives after the close is stale: the preview stays down', async () => {
    const late = prPayload('synchronize', { number: 1, sha: sha1 });
    late.pull_request.updated_at = '2029-12-31T23:59:59Z';
    expect((await send('pull_request', late)).status).toBe(202);
    await settle();
    expect(h.service.bus.deliveries.at(-1)).toMatchObject({
      rule: 'pullRequestUpdated',
      outcome: 'delivered',
      result: { outcome: 'stale' },
    });
    expect(await status(1, () => true)).toMatchObject({ status: 'torn_down' });
  });

  test('reopened: deployed again', async () => {
    expect((await send('pull_request', prPayload('reopened', { number: 1, sha: sha1 }))).status).toBe(202);
    await settle();
    expect(await status(1)).toMatchObject({ status: 'ready', lastDeployedSha: sha1 });
  });
});

describe('two events of a pull request in the same second (GitHub stamps updated_at to the second)', () => {
  /** A pull_request delivery stamped `at` (instead of the next second). */
  const sendAt = (action: string, at: string, o: Parameters<typeof prPayload>[1]) => {
    const payload = prPayload(action, o);
    payload.pull_request.updated_at = at;
    return send('pull_request', payload);
  };
  const outcomes = (from: number) =>
    h.service.bus.deliveries
      .slice(from)
      .filter((d) => d.rule === 'pullRequestUpdated')
      .map((d) => (d as { result?: { outcome?: string } }).result?.outcome);
  const AT = '2031-06-01T12:00:00Z';

  test('opened at A, then synchronize to B in the same second: the preview ends at B', async () => {
    const a = commitFiles(h.gitRoot, 'acme/shop', files('tie-a'));
    const b = commitFiles(h.gitRoot, 'acme/shop', files('tie-b'));
    // The pull request's branch is at B now (the synchronize moved it).
    setBranch(h.gitRoot, 'acme/shop', 'feature-9', b);
    const from = h.service.bus.deliveries.length;
    expect((await sendAt('opened', AT, { number: 9, sha: a })).status).toBe(202);
    await h.service.bus.idle();
    expect((await sendAt('synchronize', AT, { number: 9, sha: b })).status).toBe(202);
    await settle();
    expect(outcomes(from)).toEqual(['deploy requested', 'deploy requested']);
    const s = await status(9, (x) => x.lastDeployedSha === b && settled(x));
    expect(s).toMatchObject({ status: 'ready', lastDeployedSha: b });
    expect((await hit(s.urls.web!)).version).toBe('tie-b');
  }, 60_000);

  test("B's event first, then A's of the same second: A is stale, the preview stays at B", async () => {
    const a = commitFiles(h.gitRoot, 'acme/shop', files('tie2-a'));
    const b = commitFiles(h.gitRoot, 'acme/shop', files('tie2-b'));
    setBranch(h.gitRoot, 'acme/shop', 'feature-10', b);
    const from = h.service.bus.deliveries.length;
    expect((await sendAt('synchronize', AT, { number: 10, sha: b })).status).toBe(202);
    await settle();
    const before = (await findEnvironment(h.org.orgId, 'acme/shop#10'))!;
    expect((await sendAt('opened', AT, { number: 10, sha: a })).status).toBe(202);
    await settle();
    expect(outcomes(from)).toEqual(['deploy requested', 'stale']);
    expect(await status(10)).toMatchObject({ status: 'ready', lastDeployedSha: b });
    expect((await findEnvironment(h.org.orgId, 'acme/shop#10'))!.generation).toBe(before.generation);
  }, 60_000);

  test('a close in the same second wins against an update, even one at the head now', async () => {
    const a = commitFiles(h.gitRoot, 'acme/shop', files('tie3-a'));
    const b = commitFiles(h.gitRoot, 'acme/shop', files('tie3-b'));
    setBranch(h.gitRoot, 'acme/shop', 'feature-11', b);
    expect((await sendAt('opened', '2031-06-01T11:59:59Z', { number: 11, sha: a })).status).toBe(202);
    await settle();
    expect(await status(11)).toMatchObject({ status: 'ready', lastDeployedSha: a });
    const from = h.service.bus.deliveries.length;
    expect((await sendAt('closed', AT, { number: 11, sha: a })).status).toBe(202);
    await h.service.bus.idle();
    expect((await sendAt('synchronize', AT, { number: 11, sha: b })).status).toBe(202);
    await settle();
    expect(outcomes(from)).toEqual(['stale']);
    expect(await status(11, (x) => x.status === 'torn_down')).toMatchObject({ status: 'torn_down' });
  }, 60_000);
});

describe('a close during a build', () => {
  test('teardown wins: torn_down, the deploy ended quietly', async () => {
    const slow = `apps:\n  web:\n    port: 3000\n    build: node -e "setTimeout(()=>{},4000)"\n    command: node server.js web\n`;
    const sha = commitFiles(h.gitRoot, 'acme/shop', files('slow', slow));
    expect((await send('pull_request', prPayload('opened', { number: 2, sha }))).status).toBe(202);
    await status(2, (s) => s.phase === 'building-images');
    expect((await send('pull_request', prPayload('closed', { number: 2, sha }))).status).toBe(202);
    await settle();
    const s = await status(2, (x) => x.status === 'torn_down' || x.status === 'failed');
    expect(s).toMatchObject({ status: 'torn_down', urls: {} });
    const runs = [...h.service.workflows.executions.values()].filter((e) => e.input.envKey === 'acme/shop#2');
    expect(runs.map((r) => [r.workflow, r.status])).toEqual([
      ['deploy', 'succeeded'], // superseded: ended quietly
      ['teardown', 'succeeded'],
    ]);
    expect(deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-2').map((x) => x.state)).toEqual([
      'in_progress',
      'inactive',
    ]);
  }, 60_000);
});

describe('a pull request from a fork', () => {
  test('deploys without the secret bundles, and says so (API and PR)', async () => {
    expect(
      (await send('pull_request', prPayload('opened', { number: 3, sha: sha1, forkOf: 'mallory/shop' })))
        .status,
    ).toBe(202);
    await settle();
    const s = await status(3);
    expect(s).toMatchObject({ status: 'ready', fork: true });
    expect((await hit(s.urls.web!)).env).toEqual({ API_TOKEN: null });
    expect(lastComment(h.dataDir, 'acme/shop', 3)).toContain(
      "This pull request comes from a fork: its preview runs without the application's secret bundles.",
    );
    expect(deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-3').at(-1)?.body.description).toContain(
      'fork: no secret bundles',
    );
    // The same repository's own pull request gets them (seen above: tok-secret); no secret in the outbox.
    expect(readFileSync(join(h.dataDir, 'github-outbox.jsonl'), 'utf8')).not.toContain('tok-secret');
  });
});

describe('drafts', () => {
  test('a draft waits; ready_for_review deploys it', async () => {
    const draft = await send('pull_request', prPayload('opened', { number: 4, sha: sha1, draft: true }));
    expect(draft.status).toBe(202);
    expect(draft.body).toEqual({ ignored: 'draft pull request: it deploys once it is ready for review' });
    await settle();
    expect((await call(h, 'GET', path(4), { headers: auth })).status).toBe(404);

    const ready = await send('pull_request', prPayload('ready_for_review', { number: 4, sha: sha1 }));
    expect(ready.body).toMatchObject({ accepted: true, events: 1 });
    await settle();
    expect(await status(4)).toMatchObject({ status: 'ready', lastDeployedSha: sha1 });
  });

  test('an application that deploys drafts gets them at once', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/drafty', files('d1'));
    const app = await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/drafty' });
    await updateApplication(h.org.orgId, app.applicationId, { deployDrafts: true });
    const res = await send(
      'pull_request',
      prPayload('opened', { number: 1, sha, draft: true, repo: 'acme/drafty' }),
    );
    expect(res.body).toMatchObject({ accepted: true });
    await settle();
    expect(await status(1, settled, 'acme/drafty')).toMatchObject({ status: 'ready' });
  });
});

describe('pushes', () => {
  test('to the default branch: the main-branch environment (0) is redeployed at the new head', async () => {
    const sha = commitFiles(h.gitRoot, 'acme/shop', files('main-v3'));
    const res = await send('push', pushPayload('main', sha));
    expect(res.body).toMatchObject({ accepted: true, events: 1 });
    await settle();
    const s = await status(0, (x) => x.lastDeployedSha === sha && settled(x));
    expect(s.status).toBe('ready');
    expect((await hit(s.urls.web!)).version).toBe('main-v3');
    // A deployment, no comment: environment 0 has no pull request.
    expect(deploymentStates(h.dataDir, 'acme/shop', 'preview/main').at(-1)?.state).toBe('success');
    expect(outbox(h.dataDir).some((c) => c.path === '/repos/acme/shop/issues/0/comments')).toBe(false);
  });

  test('to another branch: ignored', async () => {
    const res = await send('push', pushPayload('feature-x', sha1));
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ ignored: 'push to feature-x, not to the default branch main' });
  });
});

describe('a deploy that fails', () => {
  test('the PR shows failure with the cause', async () => {
    const broken = `apps:\n  web:\n    port: 3000\n    command: node -e "console.error('no DATABASE_URL'); process.exit(1)"\n`;
    const sha = commitFiles(h.gitRoot, 'acme/shop', files('broken', broken));
    expect((await send('pull_request', prPayload('opened', { number: 5, sha }))).status).toBe(202);
    await settle();
    const s = await status(5);
    expect(s.status).toBe('failed');
    const last = deploymentStates(h.dataDir, 'acme/shop', 'preview/pr-5').at(-1)!;
    expect(last.state).toBe('failure');
    expect(last.body.description).toBe(`Preview failed: ${s.error}`.slice(0, 140));
    const comment = lastComment(h.dataDir, 'acme/shop', 5)!;
    expect(comment).toContain('### Preview environment: failed');
    expect(comment).toContain('**Why it failed**');
    expect(comment).toContain('no DATABASE_URL');
  });
});

describe('test runs on the pull request', () => {
  test('the comment lists the latest run of each test that ran against the environment', async () => {
    const env = (await findEnvironment(h.org.orgId, 'acme/shop#4'))!;
    expect(env.environmentId).toEqual(expect.any(String));
    const run = async (runId: string, testId: string, status: string, createdAt: string, version?: string) =>
      ddb().send(
        new PutCommand({
          TableName: table('runs'),
          Item: {
            runId,
            orgId: h.org.orgId,
            testId,
            name: `test ${testId}`,
            status,
            createdAt,
            createdKey: `${createdAt}#${runId}`,
            testKey: `${h.org.orgId}#${testId}`,
            folderKey: `${h.org.orgId}#f`,
            statusKey: `${h.org.orgId}#${status}`,
            folder: { id: 'f', name: 'f' },
            source: 'preview',
            variables: {},
            steps: [],
            ...(version ? { applicationVersionId: version } : {}),
          },
        }),
      );
    await run('run-old', 'checkout', 'passed', '2030-01-01T00:00:01.000Z', env.environmentId);
    await run('run-new', 'checkout', 'failed', '2030-01-01T00:00:02.000Z', env.environmentId);
    await run('run-login', 'login', 'passed', '2030-01-01T00:00:03.000Z', env.environmentId);
    await run('run-elsewhere', 'signup', 'passed', '2030-01-01T00:00:04.000Z', 'another-environment');
    expect(await reportStatus({ prStatus: prStatus() }, env)).toBe('published');
    const comment = lastComment(h.dataDir, 'acme/shop', 4)!;
    expect(comment).toContain('**Latest test runs**');
    expect(comment).toContain('| test checkout | `failed` | `run-new` |');
    expect(comment).toContain('| test login | `passed` | `run-login` |');
    expect(comment).not.toContain('run-old');
    expect(comment).not.toContain('run-elsewhere');
  });
});
