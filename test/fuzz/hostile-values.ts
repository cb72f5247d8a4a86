import fc from 'fast-check';
import { MAX_PR } from '../../functions/shared/validation.js';

/*
 * What a hostile client sends, whatever the route: header names and values, path segments, query strings
 * and bodies no route accepts. The route runner (`routes.test.ts`) draws its cases from them.
 */

export const PROTO_NAMES = [
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__lookupSetter__',
];
const protoName = fc.constantFrom(...PROTO_NAMES);
const printable = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
export const latin1 = fc.oneof(
  { weight: 4, arbitrary: printable },
  fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)),
);

/** Header names that frame the message (the raw client writes those itself) or are probed on their own. */
const FRAMING = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'expect',
  'upgrade',
  'te',
  'trailer',
  'keep-alive',
  'proxy-connection',
  'http2-settings',
]);
const headerName = fc
  .oneof(
    fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/),
    protoName,
    fc.constantFrom(
      'Authorization',
      'AUTHORIZATION',
      'svc-client-id',
      'SVC-Client-Secret',
      'X-Forwarded-Proto',
      'x-forwarded-for',
      'content-type',
      'accept',
      'user-agent',
    ),
  )
  .filter((n) => !FRAMING.has(n.toLowerCase()));
const headerValue = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: latin1, maxLength: 60 }).map((v) => v.trim()) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('', 'Bearer', 'Bearer ', 'https', 'javascript', '{}', '__proto__'),
  },
  { weight: 1, arbitrary: fc.string({ unit: printable, minLength: 2_000, maxLength: 6_000 }) },
);
export const extraHeaders = fc.array(fc.tuple(headerName, headerValue), { maxLength: 5 });

/** Percent-encode any string, lone surrogates included (as the UTF-8 of U+FFFD, as a browser would). */
export const encode = (s: string): string => {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
};

export const garbageSegment = fc.oneof(
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map(encode),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).map(encode),
  fc.constantFrom(...PROTO_NAMES).map(encode),
  fc.constantFrom(
    '..',
    '.',
    '%2e%2e',
    '%',
    '%%',
    '%zz',
    '%E0%A4%A',
    '%C0%AF',
    '%2F',
    'a%2Fb',
    '%00',
    '%FF',
    '%ED%A0%80',
  ),
  fc
    .constantFrom('-1', '1.5', '1e3', '0x10', '99999999999', String(MAX_PR + 1), ' 1', 'A-', 'a_b', 'Web')
    .map(encode),
  fc.string({ unit: 'grapheme-ascii', minLength: 200, maxLength: 2_000 }).map(encode),
);

/** A query string: keys that are Object property names, known keys, garbage, repeats, broken escapes. */
export const queryString = fc
  .array(
    fc.oneof(
      fc
        .tuple(
          fc.oneof(
            protoName,
            fc.constantFrom('limit', 'offset', 'test', 'folder', 'status', 'media', 'steps'),
            fc.string({ maxLength: 12 }),
          ),
          fc.oneof(
            fc.string({ maxLength: 20 }),
            fc.constantFrom(
              'true',
              'false',
              '1',
              '0',
              '-1',
              '1e3',
              '99999999999999999',
              'pending',
              'constructor',
            ),
          ),
        )
        .map(([k, v]) => `${encode(k)}=${encode(v)}`),
      fc.constantFrom(
        '%',
        '%zz=1',
        '=',
        '&',
        'a=b=c',
        'limit',
        'steps=%74rue',
        '__proto__[x]=1',
        'a%00b=%FF',
      ),
    ),
    { maxLength: 6 },
  )
  .map((parts) => (parts.length ? `?${parts.join('&')}` : ''));

/** Bodies a route must refuse (400 or 413), whatever its schema, with a label for the report. */
export const deepJson = fc
  .tuple(fc.integer({ min: 65, max: 20_000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
  .map(([depth, open, proto]) => {
    const close = open === '[' ? ']' : '}';
    return `${open.repeat(depth)}${proto ? '{"__proto__":{"x":1}}' : '1'}${close.repeat(depth)}`;
  });
export const garbageText = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 200 })
  .filter((s) => s.trim() !== '' && !parses(s));
export const invalidUtf8 = fc
  .tuple(fc.string({ maxLength: 20 }), fc.uint8Array({ minLength: 1, maxLength: 8 }))
  .map(([prefix, bytes]) =>
    Buffer.concat([Buffer.from(`{"value":"${prefix}`), Buffer.from([0xff, ...bytes])]),
  );
export const nonObjectJson = fc
  .oneof(
    fc.integer(),
    fc.double({ noNaN: true }),
    fc.string(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  )
  .map((v) => JSON.stringify(v))
  .filter((t) => t.trim() !== '');
/** A valid body with a `__proto__` member written into its JSON, at the top or nested. */
export const withProto = (valid: () => unknown) =>
  fc.tuple(fc.jsonValue({ maxDepth: 2 }), fc.boolean()).map(([payload, nested]) => {
    const member = `"__proto__":${JSON.stringify(payload ?? null)}`;
    const text = JSON.stringify(valid());
    return nested
      ? text.replace(/^\{/, `{"extra":[{"deeper":{${member}}}],`)
      : text.replace(/^\{/, `{${member},`);
  });
export const oversized = (max: number) =>
  fc
    .oneof(
      { weight: 4, arbitrary: fc.integer({ min: 1, max: 40_000 }) },
      fc.integer({ min: 500_000, max: 2_000_000 }),
    )
    .map((extra) => JSON.stringify({ value: 'x'.repeat(max + extra) }));

function parses(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}
