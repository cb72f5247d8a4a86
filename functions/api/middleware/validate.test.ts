import { describe, expect, test } from '@jest/globals';
import * as z from 'zod/mini';
import { middyRequest } from '../../../test/support/middy-request.js';
import { ValidationError } from '../../shared/errors.js';
import { takeInput, validate } from './validate.js';

const schemas = {
  params: z.object({ env_key: z.string().check(z.minLength(3)) }),
  query: z.object({ limit: z.optional(z.string().check(z.regex(/^[0-9]+$/))) }),
  body: z.object({ name: z.string() }),
};

describe('validate', () => {
  test('hands the handler the validated input with the principal, request id, base URL, body and headers', () => {
    const request = middyRequest(
      {
        pathParameters: { env_key: 'acme-web-pr-7' },
        queryStringParameters: { limit: '5' },
        requestContext: { domainName: 'api.example.com' } as never,
      },
      {
        principal: { orgId: 'org1' },
        body: { name: 'web' },
        rawBody: '{"name":"web"}',
        headers: { host: 'api.example.com', 'x-forwarded-proto': 'http' },
      },
    );
    validate(schemas).before!(request);
    const input = takeInput(request.event);
    expect({
      ...input,
      params: { ...(input?.params as object) },
      query: { ...(input?.query as object) },
    }).toEqual({
      params: { env_key: 'acme-web-pr-7' },
      query: { limit: '5' },
      body: { name: 'web' },
      principal: { orgId: 'org1' },
      requestId: 'req-1',
      baseUrl: 'http://api.example.com',
      rawBody: '{"name":"web"}',
      headers: { host: 'api.example.com', 'x-forwarded-proto': 'http' },
    });
    // Handed over once: the event is not kept.
    expect(takeInput(request.event)).toBeUndefined();
  });

  test.each([
    ['path', { pathParameters: { env_key: 'ab' } }, {}, /^invalid path: env_key: /],
    ['query', { queryStringParameters: { limit: 'five' } }, {}, /^invalid query: limit: /],
    ['request body', {}, { body: { name: 1 } }, /^invalid request body: name: /],
  ])('a bad %s is a 400 naming the field', (_where, event, internal, message) => {
    const request = middyRequest(
      { pathParameters: { env_key: 'acme-web' }, ...event },
      { body: { name: 'a' }, ...internal },
    );
    expect(() => validate(schemas).before!(request)).toThrow(ValidationError);
    expect(() => validate(schemas).before!(request)).toThrow(message);
    expect(takeInput(request.event)).toBeUndefined();
  });

  test('parts without a schema pass as they are; parameters are null-prototype copies without __proto__', () => {
    const query = JSON.parse('{"__proto__":"x","constructor":"y","a":"1"}');
    const request = middyRequest({ queryStringParameters: query }, { body: [1, 2] });
    validate({}).before!(request);
    const input = takeInput(request.event)!;
    expect(input.body).toEqual([1, 2]);
    expect(Object.getPrototypeOf(input.query)).toBeNull();
    expect(Object.keys(input.query as object).sort()).toEqual(['a', 'constructor']);
    expect({ ...(input.params as object) }).toEqual({});
  });

  test('the base URL: Host as sent, else the API domain, else localhost; https unless forwarded as http', () => {
    const baseUrl = (event: Parameters<typeof middyRequest>[0]) => {
      const request = middyRequest(event);
      validate({}).before!(request);
      return takeInput(request.event)?.baseUrl;
    };
    expect(baseUrl({ headers: { Host: 'preview.example.com:8443' } })).toBe(
      'https://preview.example.com:8443',
    );
    expect(baseUrl({ requestContext: { domainName: 'x.example.com' } as never })).toBe(
      'https://x.example.com',
    );
    expect(baseUrl({ requestContext: { domainName: 'a b' } as never })).toBe('https://localhost');
    expect(baseUrl({ headers: { host: 'h', 'x-forwarded-proto': 'FTP' } })).toBe('https://h');
    // The execute-api host carries the stage as the first path segment.
    expect(
      baseUrl({
        headers: { host: 'abc.execute-api.eu-west-1.amazonaws.com' },
        requestContext: { stage: 'api' } as never,
      }),
    ).toBe('https://abc.execute-api.eu-west-1.amazonaws.com/api');
  });

  test.each(['a b', '[::', ''])('a malformed Host header (%p) is a 400', (host) => {
    const request = middyRequest({ headers: { host } });
    expect(() => validate({}).before!(request)).toThrow(new ValidationError('malformed Host header'));
  });
});
