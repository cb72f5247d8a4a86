import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import { WINDOW_SECONDS } from '../../../functions/core/applications/fair-share.js';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call, client, linkRepo } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * Each organization's fair share (core/fair-share.ts), through the local server with low limits: 5
 * requests a second (50 per window), one deploy and one run in flight. The limits are set before the
 * server reads its configuration (test/support/env.ts raises them for every other suite).
 */
const h = localServerForFile({
  env: {
    PREVIEW_ORG_REQUESTS_PER_SECOND: '5',
    PREVIEW_ORG_CONCURRENT_DEPLOYS: '1',
    PREVIEW_ORG_CONCURRENT_RUNS: '1',
  },
});
const BUDGET = 5 * WINDOW_SECONDS;

/** An environment of `org` in flight (building), as a deploy the pipeline has not finished leaves it. */
async function inFlightEnvironment(org: OrgCredentials, repo: string, pr: number) {
  await ddb().send(
    new PutCommand({
      TableName: table('environments'),
      Item: {
        orgId: org.orgId,
        envKey: keys.environments.envKey(repo, pr),
        repoFullName: repo,
        prNumber: pr,
        status: 'building',
        generation: 1,
        updatedAt: new Date().toISOString(),
      },
    }),
  );
}

describe('requests', () => {
  test("a storm from one organization gets 429 with Retry-After past its budget; another organization's requests are answered", async () => {
    // Prepare
    const noisy = await h.newOrg('noisy');
    const quiet = await h.newOrg('quiet');
    // Act: 3 × the budget at once from one organization, with the other's polls in between.
    const storm = Array.from({ length: 3 * BUDGET }, () =>
      call(h, 'GET', '/v1/preview/environments', { headers: bearer(noisy) }),
    );
    const polls = Array.from({ length: 10 }, () =>
      call(h, 'GET', '/v1/preview/environments', { headers: bearer(quiet) }),
    );
    const [noisyAnswers, quietAnswers] = await Promise.all([Promise.all(storm), Promise.all(polls)]);
    // Assess: at most the budget of the two windows the storm may straddle went through; the rest 429.
    const admitted = noisyAnswers.filter((r) => r.status === 200).length;
    const refused = noisyAnswers.filter((r) => r.status === 429);
    expect(admitted + refused.length).toBe(3 * BUDGET);
    expect(admitted).toBeGreaterThanOrEqual(1);
    expect(admitted).toBeLessThanOrEqual(2 * BUDGET);
    expect(refused.length).toBeGreaterThanOrEqual(BUDGET);
    expect(refused[0]!.body).toEqual({
      error: expect.stringMatching(
        /^too many requests: this organization may make 50 requests per 10 seconds \(5\/s\); retry after \d+ s; PREVIEW_ORG_REQUESTS_PER_SECOND raises this limit \(0 turns it off\)$/,
      ),
    });
    const retryAfter = Number(refused[0]!.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
    expect(quietAnswers.map((r) => r.status)).toEqual(Array(10).fill(200));
  }, 60_000);

  test('a refused write changes nothing', async () => {
    // Prepare: spend the organization's budget on reads.
    const org = await h.newOrg('spent');
    await linkRepo(org, 'acme/spent');
    let last = 200;
    for (let i = 0; i < 2 * BUDGET + 1 && last !== 429; i++)
      last = (await call(h, 'GET', '/v1/preview/environments', { headers: bearer(org) })).status;
    expect(last).toBe(429);
    // Act
    const res = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(org),
      body: { repoFullName: 'acme/spent', prNumber: 3, headSha: 'a'.repeat(40), headRef: 'x' },
    });
    // Assess
    expect(res.status).toBe(429);
    const { Item } = await ddb().send(
      new GetCommand({
        TableName: table('environments'),
        Key: { orgId: org.orgId, envKey: keys.environments.envKey('acme/spent', 3) },
      }),
    );
    expect(Item).toBeUndefined();
  }, 60_000);
});

describe('deploys in flight', () => {
  test('a deploy past the limit is 429 naming it; redeploying the environment in flight is not refused by it', async () => {
    // Prepare
    const org = await h.newOrg('deploys');
    await linkRepo(org, 'acme/busy');
    await inFlightEnvironment(org, 'acme/busy', 1);
    // Act
    const another = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(org),
      body: { repoFullName: 'acme/busy', prNumber: 2, headSha: 'b'.repeat(40), headRef: 'x' },
    });
    const same = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(org),
      body: { repoFullName: 'acme/busy', prNumber: 1, headSha: 'c'.repeat(40), headRef: 'x' },
    });
    // Assess
    expect(another.status).toBe(429);
    expect(another.headers.get('retry-after')).toBe('30');
    expect(another.body.error).toBe(
      'too many deploys in flight: this organization has 1 (pending, building, deploying), at most 1; retry when one is ready or failed; ' +
        'PREVIEW_ORG_CONCURRENT_DEPLOYS raises this limit (0 turns it off)',
    );
    expect(same.status).toBe(202);
  });

  test("another organization's deploys in flight take none of this one's", async () => {
    const org = await h.newOrg('free');
    await linkRepo(org, 'acme/free');
    const res = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(org),
      body: { repoFullName: 'acme/free', prNumber: 1, headSha: 'd'.repeat(40), headRef: 'x' },
    });
    expect(res.status).toBe(202);
  });
});

describe('runs in flight', () => {
  test('a run past the limit is 429 naming it; a run in flight of another organization does not count', async () => {
    // Prepare: a run of `busy` running (its keys as a run's write sets them).
    const busy = await h.newOrg('runs-busy');
    const other = await h.newOrg('runs-other');
    await ddb().send(
      new PutCommand({
        TableName: table('runs'),
        Item: {
          runId: 'r-in-flight',
          orgId: busy.orgId,
          status: 'running',
          ...keys.runs.indexKeys({
            orgId: busy.orgId,
            runId: 'r-in-flight',
            testId: 't1',
            folderId: 'f1',
            status: 'running',
            createdAt: new Date().toISOString(),
          }),
        },
      }),
    );
    // Act
    const refused = await call(h, 'POST', '/test/no-such-test/run', { headers: client(busy) });
    const counted = await call(h, 'POST', '/test/no-such-test/run', { headers: client(other) });
    // Assess
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe(
      'too many runs in flight: this organization has 1 pending or running, at most 1; retry when one ends; ' +
        'PREVIEW_ORG_CONCURRENT_RUNS raises this limit (0 turns it off)',
    );
    // The other organization gets past the limit to the test lookup (which finds nothing).
    expect(counted.status).toBe(404);
  });
});
