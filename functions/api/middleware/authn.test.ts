import { createHmac } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import { middyRequest } from '../../../test/support/middy-request.js';
import type { AuthKind } from '../../manifest/routes.js';
import { UnauthorizedError } from '../../shared/errors.js';
import { authn } from './authn.js';

type Call = { kind: AuthKind; headers: Record<string, string>; rawBody?: string; secret?: string };

/** A fake `authenticate` that records what it was asked and answers for organization org1. */
function recorder() {
  const calls: Call[] = [];
  const authenticate = async (
    kind: AuthKind,
    headers: Record<string, string>,
    webhook?: { rawBody: Buffer; secret: () => Promise<string> },
  ) => {
    calls.push({
      kind,
      headers: { ...headers },
      ...(webhook ? { rawBody: webhook.rawBody.toString('utf8'), secret: await webhook.secret() } : {}),
    });
    return { orgId: 'org1' };
  };
  return { calls, authenticate };
}

describe('authn', () => {
  test("checks the route's credential kind with the headers, names lower-cased, and leaves both for the chain", async () => {
    const { calls, authenticate } = recorder();
    const request = middyRequest({ headers: { Authorization: 'Bearer pvk_x', Host: 'h' }, body: '{"a":1}' });
    await authn({ kind: 'apiKey', authenticate }).before!(request);
    expect(calls).toEqual([{ kind: 'apiKey', headers: { authorization: 'Bearer pvk_x', host: 'h' } }]);
    expect(request.internal.principal).toEqual({ orgId: 'org1' });
    expect({ ...request.internal.headers }).toEqual({ authorization: 'Bearer pvk_x', host: 'h' });
    // The body is not read: it is jsonBody's, after authentication.
    expect(request.internal.body).toBeUndefined();
    expect(request.internal.rawBody).toBeUndefined();
  });

  test("a webhook route hands over the body's bytes as received (base64 decoded) and the webhook secret", async () => {
    const { calls, authenticate } = recorder();
    const body = Buffer.from('{"action":"opened","é":1}').toString('base64');
    const mw = authn({ kind: 'githubWebhook', webhookSecret: async () => 'whsec', authenticate });
    await mw.before!(middyRequest({ body, isBase64Encoded: true }));
    await mw.before!(middyRequest({ body: 'plain' }));
    await mw.before!(middyRequest());
    expect(calls.map(({ rawBody, secret }) => [rawBody, secret])).toEqual([
      ['{"action":"opened","é":1}', 'whsec'],
      ['plain', 'whsec'],
      ['', 'whsec'],
    ]);
  });

  test('no body goes to a route of another kind, nor to a webhook route without a secret', async () => {
    const { calls, authenticate } = recorder();
    await authn({ kind: 'client', webhookSecret: async () => 's', authenticate }).before!(
      middyRequest({ body: '{}' }),
    );
    await authn({ kind: 'githubWebhook', authenticate }).before!(middyRequest({ body: '{}' }));
    expect(calls.map((c) => [c.kind, 'rawBody' in c])).toEqual([
      ['client', false],
      ['githubWebhook', false],
    ]);
  });

  test('with core/auth.ts: missing credentials are a 401 that names what the route takes', async () => {
    const request = middyRequest({ headers: { 'svc-client-id': 'pvc_abcdefgh' } });
    const failure = authn({ kind: 'apiKey' }).before!(request);
    await expect(failure).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(failure).rejects.toThrow(/this route takes an organization API key/);
    expect(request.internal.principal).toBeUndefined();
  });

  test("with core/auth.ts: a webhook signed with the secret over the body's bytes is GitHub's", async () => {
    const bytes = Buffer.from('{"zen":"Keep it logically awesome."}');
    const signature = `sha256=${createHmac('sha256', 'whsec').update(bytes).digest('hex')}`;
    const mw = authn({ kind: 'githubWebhook', webhookSecret: async () => 'whsec' });
    const signed = middyRequest({
      headers: { 'X-Hub-Signature-256': signature },
      body: bytes.toString('base64'),
      isBase64Encoded: true,
    });
    await mw.before!(signed);
    expect(signed.internal.principal).toEqual({ orgId: '', githubWebhook: true });
    const tampered = middyRequest({ headers: { 'X-Hub-Signature-256': signature }, body: '{"zen":"x"}' });
    await expect(mw.before!(tampered)).rejects.toThrow(/missing or invalid X-Hub-Signature-256/);
  });
});
