import { afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { middyRequest } from '../../../test/support/middy-request.js';
import { routes } from '../../manifest/routes.js';
import { NotFoundError } from '../../shared/errors.js';
import { setLogSink } from '../../shared/log.js';
import { json } from './reply.js';
import { requestLog } from './request-log.js';

const logs: Record<string, unknown>[] = [];
beforeAll(() => setLogSink((l) => logs.push(JSON.parse(l))));
afterEach(() => {
  logs.length = 0;
});

describe('requestLog', () => {
  test('an answered request is one line: route, method, path, status, latency, request id, organization', async () => {
    const mw = requestLog('getEnvironment');
    const request = middyRequest({ headers: { authorization: 'Bearer pvk_secret' }, body: '{"x":1}' });
    await mw.before!(request);
    expect(request.internal.started).toBeGreaterThan(0);
    expect(logs).toEqual([]);
    request.internal.principal = { orgId: 'org1' };
    request.response = json(200, { ok: true });
    await mw.after!(request);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toEqual({
      level: 'info',
      time: expect.any(String),
      message: 'request',
      route: 'getEnvironment',
      method: 'GET',
      path: routes.getEnvironment.path,
      status: 200,
      latencyMs: expect.any(Number),
      requestId: 'req-1',
      orgId: 'org1',
    });
    expect(logs[0]!.latencyMs as number).toBeGreaterThanOrEqual(0);
    // Neither a header value nor the body reaches the line.
    expect(JSON.stringify(logs)).not.toMatch(/pvk_secret|"x"/);
  });

  test("a failed request's line names the error only when it is a 500", async () => {
    const mw = requestLog('getEnvironment');
    const notFound = middyRequest();
    await mw.before!(notFound);
    notFound.error = new NotFoundError('no such environment');
    notFound.response = json(404, { error: 'no such environment' });
    await mw.onError!(notFound);
    const crash = middyRequest({}, {}, 'req-2');
    await mw.before!(crash);
    crash.error = new TypeError('x is undefined');
    crash.response = json(500, { error: 'internal error' });
    await mw.onError!(crash);
    expect(logs.map((l) => [l.status, l.requestId, l.error])).toEqual([
      [404, 'req-1', undefined],
      [500, 'req-2', 'TypeError'],
    ]);
    expect(JSON.stringify(logs)).not.toContain('x is undefined');
  });

  test('a webhook (no organization) is logged without one', async () => {
    const mw = requestLog('githubWebhook');
    const request = middyRequest({}, { principal: { orgId: '', githubWebhook: true } });
    await mw.before!(request);
    request.response = json(202, {});
    await mw.after!(request);
    expect(logs[0]).toMatchObject({ route: 'githubWebhook', method: 'POST', status: 202 });
    expect(logs[0]).not.toHaveProperty('orgId');
  });
});
