import { describe, expect, test } from '@jest/globals';
import { middyRequest } from '../../../test/support/middy-request.js';
import { TooManyRequestsError } from '../../shared/errors.js';
import { fairShare } from './fair-share.js';

describe('fairShare', () => {
  test("counts the request against the caller's organization", async () => {
    const taken: string[] = [];
    const mw = fairShare({ take: async (orgId) => void taken.push(orgId) });
    await mw.before!(middyRequest({}, { principal: { orgId: 'org1' } }));
    await mw.before!(middyRequest({}, { principal: { orgId: 'org2' } }));
    expect(taken).toEqual(['org1', 'org2']);
  });

  test("past the organization's share the request fails with the 429 the limiter raised", async () => {
    const mw = fairShare({
      take: async () => {
        throw new TooManyRequestsError('too many requests', 3);
      },
    });
    await expect(mw.before!(middyRequest({}, { principal: { orgId: 'org1' } }))).rejects.toMatchObject({
      statusCode: 429,
      retryAfterSeconds: 3,
    });
  });

  test("GitHub's webhooks, and a request without an organization, are not counted", async () => {
    const taken: string[] = [];
    const mw = fairShare({ take: async (orgId) => void taken.push(orgId) });
    await mw.before!(middyRequest({}, { principal: { orgId: '', githubWebhook: true } }));
    await mw.before!(middyRequest({}, { principal: { orgId: '' } }));
    await mw.before!(middyRequest());
    expect(taken).toEqual([]);
  });
});
