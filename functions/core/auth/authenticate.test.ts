import { createHmac } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import { UnauthorizedError } from '../../shared/errors.js';
import { authenticate, verifySignature } from './authenticate.js';

/*
 * The webhook signature: `X-Hub-Signature-256` is `sha256=` + the HMAC-SHA256 of the raw body
 * under the App's webhook secret, checked in constant time, before the body is parsed.
 */

// GitHub's published test vector (docs: "Validating webhook deliveries").
const SECRET = "It's a Secret to Everybody";
const PAYLOAD = 'Hello, World!';
const SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

describe('verifySignature', () => {
  test("GitHub's published vector verifies", () => {
    expect(verifySignature(SECRET, PAYLOAD, SIGNATURE)).toBe(true);
    expect(verifySignature(SECRET, Buffer.from(PAYLOAD), SIGNATURE)).toBe(true);
    // Hex digits in either case, surrounding blanks tolerated.
    expect(verifySignature(SECRET, PAYLOAD, ` ${SIGNATURE.toUpperCase().replace('SHA256', 'sha256')} `)).toBe(
      true,
    );
  });

  test('a tampered body does not', () => {
    expect(verifySignature(SECRET, 'Hello, World?', SIGNATURE)).toBe(false);
    expect(verifySignature(SECRET, `${PAYLOAD} `, SIGNATURE)).toBe(false);
    expect(verifySignature(SECRET, '', SIGNATURE)).toBe(false);
  });

  test('a wrong secret does not', () => {
    expect(verifySignature("It's a Secret to Nobody", PAYLOAD, SIGNATURE)).toBe(false);
    expect(verifySignature('', PAYLOAD, SIGNATURE)).toBe(false);
  });

  test('a missing or malformed header does not', () => {
    for (const header of [
      undefined,
      '',
      'sha256=',
      SIGNATURE.slice(0, -2),
      `${SIGNATURE}00`,
      SIGNATURE.replace('sha256=', 'sha1='),
      SIGNATURE.replace('sha256=', ''),
      `sha256=${'z'.repeat(64)}`,
    ])
      expect(verifySignature(SECRET, PAYLOAD, header)).toBe(false);
  });

  test('the signature covers the bytes, not a re-serialization of the JSON', () => {
    const body = '{"a": 1,  "b":"é"}';
    const sig = `sha256=${createHmac('sha256', SECRET).update(Buffer.from(body, 'utf8')).digest('hex')}`;
    expect(verifySignature(SECRET, Buffer.from(body, 'utf8'), sig)).toBe(true);
    expect(verifySignature(SECRET, JSON.stringify(JSON.parse(body)), sig)).toBe(false);
  });
});

describe('authenticate (githubWebhook)', () => {
  const creds = (body = PAYLOAD, secret = SECRET) => ({
    rawBody: Buffer.from(body),
    secret: async () => secret,
  });

  test('a valid signature authenticates GitHub, for no one organization', async () => {
    await expect(
      authenticate('githubWebhook', { 'x-hub-signature-256': SIGNATURE }, creds()),
    ).resolves.toEqual({
      orgId: '',
      githubWebhook: true,
    });
  });

  test.each([
    ['a missing header', {}, creds()],
    ['a tampered body', { 'x-hub-signature-256': SIGNATURE }, creds('Hello, World?')],
    ['a wrong secret', { 'x-hub-signature-256': SIGNATURE }, creds(PAYLOAD, 'another secret')],
    ['no way to check it', { 'x-hub-signature-256': SIGNATURE }, undefined],
  ])('401 for %s', async (_name, headers, webhook) => {
    await expect(authenticate('githubWebhook', headers as Record<string, string>, webhook)).rejects.toThrow(
      UnauthorizedError,
    );
  });

  test('an API key or client credentials never pass for a webhook', async () => {
    await expect(
      authenticate(
        'githubWebhook',
        { authorization: 'Bearer pvk_abcdefgh_x', 'svc-client-id': 'pvc_x' },
        creds(),
      ),
    ).rejects.toThrow('missing or invalid X-Hub-Signature-256');
  });
});
