import { describe, expect, test } from '@jest/globals';
import { middyRequest } from '../../../test/support/middy-request.js';
import { DEFAULT_MAX_BODY_BYTES } from '../../manifest/routes.js';
import { PayloadTooLargeError, ValidationError } from '../../shared/errors.js';
import { jsonBody, jsonDepthExceeds, MAX_JSON_DEPTH } from './json-body.js';

/** What the middleware leaves for the chain from `event`, or the error it refuses it with. */
async function read(mw: ReturnType<typeof jsonBody>, event: Parameters<typeof middyRequest>[0]) {
  const request = middyRequest(event);
  try {
    await mw.before!(request);
  } catch (err) {
    return { error: err as Error };
  }
  return { body: request.internal.body, rawBody: request.internal.rawBody };
}

describe('jsonBody', () => {
  const takes = jsonBody({ takesBody: true });

  test('parses a JSON body of any content type and keeps its text as sent', async () => {
    expect(
      await read(takes, { body: '{"a":[1,{"b":null}]}', headers: { 'content-type': 'text/plain' } }),
    ).toEqual({
      body: { a: [1, { b: null }] },
      rawBody: '{"a":[1,{"b":null}]}',
    });
    const utf8 = Buffer.from('{"name":"café"}').toString('base64');
    expect(await read(takes, { body: utf8, isBase64Encoded: true })).toEqual({
      body: { name: 'café' },
      rawBody: '{"name":"café"}',
    });
  });

  test('an empty body is undefined, or a 400 where the route requires one', async () => {
    expect(await read(takes, { body: null })).toEqual({ body: undefined, rawBody: undefined });
    expect(await read(takes, { body: ' \n' })).toEqual({ body: undefined, rawBody: ' \n' });
    const required = jsonBody({ takesBody: true, required: true });
    for (const body of [null, '', '  '])
      expect((await read(required, { body })).error).toEqual(new ValidationError('request body is required'));
  });

  test.each([
    ['not JSON', { body: '{"a":' }, 'request body is not valid JSON'],
    [
      'not UTF-8',
      { body: Buffer.from([0x7b, 0xff, 0x7d]).toString('base64'), isBase64Encoded: true },
      'request body is not valid UTF-8',
    ],
    [
      'nested too deeply',
      { body: `${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}` },
      `request body is nested too deeply: at most ${MAX_JSON_DEPTH} levels of arrays and objects`,
    ],
    [
      'with a __proto__ member',
      { body: '{"a":[{"__proto__":{"x":1}}]}' },
      'request body must not contain __proto__ members',
    ],
  ])('a body %s is a 400', async (_label, event, message) => {
    const { error } = await read(takes, event);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error?.message).toBe(message);
  });

  test('a body nested exactly as deep as allowed is read', async () => {
    const body = `${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`;
    expect((await read(takes, { body })).error).toBeUndefined();
  });

  test("a body over the route's cap is a 413, measured in bytes as received, before anything else", async () => {
    const capped = jsonBody({ takesBody: true, maxBodyBytes: 2048 });
    const at = `"${'é'.repeat(1023)}"`; // 2048 bytes of UTF-8, 1025 characters
    expect((await read(capped, { body: at })).body).toBe('é'.repeat(1023));
    const over = `"${'é'.repeat(1023)}x"`;
    const { error } = await read(capped, { body: over });
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect(error?.message).toBe('request body is too large: at most 2048 bytes (2 KB)');
    // Malformed and too large: the size is told first.
    expect((await read(capped, { body: `{${'x'.repeat(3000)}` })).error).toBeInstanceOf(PayloadTooLargeError);
    // A cap that is not a whole number of KB says bytes only; base64 is measured decoded.
    const odd = jsonBody({ takesBody: true, maxBodyBytes: 10 });
    const b64 = Buffer.from('"123456789"').toString('base64');
    expect((await read(odd, { body: b64, isBase64Encoded: true })).error?.message).toBe(
      'request body is too large: at most 10 bytes',
    );
  });

  test('without a cap of its own a route gets the default', async () => {
    const body = `"${'x'.repeat(DEFAULT_MAX_BODY_BYTES - 2)}"`;
    expect((await read(takes, { body })).error).toBeUndefined();
    expect((await read(takes, { body: `${body} ` })).error).toBeInstanceOf(PayloadTooLargeError);
  });

  test('a route without a body schema only caps the body, synchronously, and reads nothing', async () => {
    const ignores = jsonBody({ takesBody: false, required: true, maxBodyBytes: 8 });
    const request = middyRequest({ body: '{"a":' });
    expect(ignores.before!(request)).toBeUndefined();
    expect(request.internal).toEqual({ started: 0 });
    expect(() => ignores.before!(middyRequest({ body: '{"a":"long"}' }))).toThrow(PayloadTooLargeError);
  });
});

describe('jsonDepthExceeds', () => {
  test('counts arrays and objects, not brackets inside strings', () => {
    expect(jsonDepthExceeds('{"a":[1,{"b":[]}]}', 4)).toBe(false);
    expect(jsonDepthExceeds('{"a":[1,{"b":[]}]}', 3)).toBe(true);
    expect(jsonDepthExceeds(`{"s":"${'['.repeat(1000)}\\"${'{'.repeat(1000)}"}`, 1)).toBe(false);
    expect(jsonDepthExceeds('['.repeat(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(jsonDepthExceeds('['.repeat(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(jsonDepthExceeds('['.repeat(1_000_000), MAX_JSON_DEPTH)).toBe(true);
  });
});
