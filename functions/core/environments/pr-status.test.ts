import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchGetCommand, DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { sampleEnvironment } from '../../../test/support/environments.js';
import { tableNames, tables } from '../../manifest/tables.js';
import { commentMarker, publishToGitHub, versionOf } from '../../ports/pr-status/github-rest.js';
import { githubOutboxPath, OutboxRest } from '../../ports/pr-status/local-outbox.js';
import type { PrReport } from '../../ports/pr-status/port.js';
import { buildReport, latestTestRuns, ownerTag, renderComment } from './pr-status.js';
import type { Environment } from './types.js';

/*
 * The status of an environment on its pull request: the deployment and the comment a report makes of
 * each state, the signed access links of a protected preview (never the key), why a preview was torn
 * down, and publishing that never lets an older report overwrite a newer one.
 */

const SHA = 'a'.repeat(40);
const BASE = 'b'.repeat(40);

const env = (over: Partial<Environment> = {}): Environment =>
  sampleEnvironment({
    urls: { web: 'https://web.pr-7.example.com', api: 'https://api.pr-7.example.com' },
    ...over,
  });
const links = {
  web: 'https://web.pr-7.example.com/__preview/access?token=v1.1900000000.w',
  api: 'https://api.pr-7.example.com/__preview/access?token=v1.1900000000.a',
};

describe("a protected preview's comment", () => {
  test('each app its link, a note saying how to get fresh ones', () => {
    const text = renderComment(env(), 'success', [], links);
    expect(text).toContain('| App | URL | Access link |');
    expect(text).toContain(`| api | https://api.pr-7.example.com | [open api](${links.api}) |`);
    expect(text).toContain(`| web | https://web.pr-7.example.com | [open web](${links.web}) |`);
    expect(text).toContain('This preview is protected');
    expect(text).toContain('`previewctl envs open --repo acme/shop --pr 7`');
  });

  test('an app without a link says so; the report carries the same comment', () => {
    const text = renderComment(env(), 'success', [], { web: links.web });
    expect(text).toContain('| api | https://api.pr-7.example.com | — |');
    const built = buildReport(env(), [], links);
    expect('report' in built && built.report.comment).toBe(renderComment(env(), 'success', [], links));
    // The deployment's link stays the app's URL: the signed link is only in the comment.
    expect('report' in built && built.report.environmentUrl).toBe('https://web.pr-7.example.com');
  });

  test('no links while deploying, failed or torn down, nor for a public preview', () => {
    for (const [e, state] of [
      [env({ status: 'building' }), 'in_progress'],
      [env({ status: 'failed', error: 'x' }), 'failure'],
      [env({ status: 'torn_down', urls: {} }), 'inactive'],
    ] as const) {
      const text = renderComment(e, state, [], links);
      expect(text).not.toContain('__preview/access');
      expect(text).not.toContain('Access link');
    }
    const open = renderComment(env(), 'success');
    expect(open).toContain('| App | URL |');
    expect(open).not.toContain('protected');
  });
});

describe('the report on the pull request', () => {
  test('ready: success with the web URL; the comment lists every app', () => {
    const built = buildReport(sampleEnvironment());
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
      [sampleEnvironment({ status: 'building', phase: 'building-images' }), 'in_progress'],
      [sampleEnvironment({ status: 'failed', error: 'app web exited (exit code 1)' }), 'failure'],
      [sampleEnvironment({ status: 'torn_down', urls: {} }), 'inactive'],
    ] as const;
    for (const [e, state] of states) {
      const built = buildReport(e);
      expect('report' in built && built.report.state).toBe(state);
    }
    const failed = buildReport(
      sampleEnvironment({ status: 'failed', error: 'app web exited (exit code 1)' }),
    );
    expect('report' in failed && failed.report.comment).toContain('app web exited (exit code 1)');
    expect('report' in failed && failed.report.description).toBe(
      'Preview failed: app web exited (exit code 1)',
    );
    expect(buildReport(sampleEnvironment({ tornDownRequested: true }))).toEqual({
      skip: 'a teardown is in progress',
    });
    expect(buildReport(sampleEnvironment({ inputs: undefined, lastDeployedSha: undefined }))).toEqual({
      skip: 'the environment has no commit yet',
    });
  });

  test('a fork says its preview runs without secret bundles; env 0 gets a deployment but no comment', () => {
    const fork = buildReport(sampleEnvironment({ inputs: { headSha: SHA, headRef: 'feature', fork: true } }));
    expect('report' in fork && fork.report.comment).toContain("without the application's secret bundles");
    expect('report' in fork && fork.report.description).toContain('fork: no secret bundles');
    const main = buildReport(
      sampleEnvironment({ prNumber: 0, envKey: 'acme/shop#0', inputs: { headSha: SHA, headRef: 'main' } }),
    );
    expect('report' in main && main.report.environment).toBe('preview/main');
    expect('report' in main && main.report.comment).toBeUndefined();
  });

  test('the latest test runs of the environment, when there are any', () => {
    const text = renderComment(sampleEnvironment(), 'success', [
      { name: 'checkout | pay', status: 'passed', runId: 'run1', createdAt: '2030-01-01T00:02:00.000Z' },
    ]);
    expect(text).toContain('**Latest test runs**');
    expect(text).toContain('| checkout \\| pay | `passed` | `run1` |');
    expect(renderComment(sampleEnvironment(), 'success')).not.toContain('Latest test runs');
  });

  test('a run with healed steps is marked with their count', () => {
    const text = renderComment(sampleEnvironment(), 'success', [
      { name: 'sign up', status: 'passed', runId: 'run1', createdAt: 'c1', healedSteps: 2 },
      { name: 'log in', status: 'passed', runId: 'run2', createdAt: 'c2' },
    ]);
    expect(text).toContain('| sign up | `passed` (2 healed) | `run1` |');
    expect(text).toContain('| log in | `passed` | `run2` |');
  });
});

describe("the latest test runs read at DynamoDB's SDK boundary", () => {
  const saved = { ...process.env };
  const dynamo = mockClient(DynamoDBDocumentClient);
  beforeAll(() => {
    Object.assign(process.env, {
      AWS_REGION: 'eu-west-1',
      ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
    });
  });
  afterAll(() => {
    process.env = saved;
    dynamo.restore();
  });
  const item = (runId: string, testId: string, applicationVersionId = 'env-1') => ({
    runId,
    testId,
    name: testId,
    status: 'passed',
    createdAt: `2030-01-01T00:00:0${runId.slice(-1)}.000Z`,
    applicationVersionId,
  });

  test("each test's newest run of the environment, its healed steps read by id; a failed read marks none", async () => {
    dynamo.reset();
    dynamo
      .on(QueryCommand)
      .resolves({ Items: [item('r3', 't1'), item('r2', 't1'), item('r1', 't2'), item('r0', 't3', 'env-2')] });
    dynamo
      .on(BatchGetCommand)
      .resolves({ Responses: { 't-runs': [{ runId: 'r3', healedSteps: 3 }, { runId: 'r1' }] } });
    const env = sampleEnvironment({ environmentId: 'env-1' });
    expect((await latestTestRuns(env)).map((l) => [l.runId, l.healedSteps])).toEqual([
      ['r3', 3],
      ['r1', undefined],
    ]);
    const get = dynamo.commandCalls(BatchGetCommand)[0]!.args[0].input;
    expect(get.RequestItems!['t-runs']).toEqual({
      Keys: [{ runId: 'r3' }, { runId: 'r1' }],
      ProjectionExpression: 'runId, healedSteps',
    });
    dynamo
      .on(BatchGetCommand)
      .rejects(Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
    expect((await latestTestRuns(env)).map((l) => [l.runId, l.healedSteps])).toEqual([
      ['r3', undefined],
      ['r1', undefined],
    ]);
  });
});

describe('the PR comment says why a preview was torn down', () => {
  const env: Environment = {
    orgId: 'o',
    envKey: 'acme/shop#7',
    repoFullName: 'acme/shop',
    prNumber: 7,
    status: 'torn_down',
    createdAt: '2030-01-01T00:00:00Z',
    updatedAt: '2030-01-01T00:01:00Z',
    lastDeployedSha: 'a'.repeat(40),
    urls: {},
    generation: 3,
    teardownReason: 'the pull request has the label "no-preview"',
  };

  test('the reason in the comment and the deployment status; none without one', () => {
    expect(renderComment(env, 'inactive')).toContain(
      '**Why**: the pull request has the label "no-preview" (the application\'s preview rules).',
    );
    const built = buildReport(env);
    expect('report' in built && built.report.description).toBe(
      'Preview torn down: the pull request has the label "no-preview"',
    );
    const plain = { ...env, teardownReason: undefined };
    expect(renderComment(plain, 'inactive')).not.toContain('**Why**');
    expect('report' in buildReport(plain) && (buildReport(plain) as any).report.description).toBe(
      'Preview torn down',
    );
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
