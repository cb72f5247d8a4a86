import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import type * as z from 'zod/mini';
import { createApplication, type OrgCredentials } from '../../functions/core/applications/applications.js';
import { importTests } from '../../functions/core/test-definitions/definitions.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  type RouteDef,
  type RouteId,
  routeIds,
  routes,
} from '../../functions/manifest/routes.js';
import {
  appName,
  envVarKey,
  HOST_RE,
  MAX_PR,
  owner,
  prPath,
  queryInteger,
  repo,
  rowId,
} from '../../functions/shared/validation.js';
import { compileRoutes, matchRoute } from '../../lib/local/http-bridge.js';
import { bearer, call, client } from '../support/api.js';
import { localServerForFile } from '../support/local-server.js';
import { isErrorBody, type RawResponse, rawRequest } from '../support/raw-http.js';
import { closeSnapshots, snapshot, stableJson } from '../support/stored-state.js';

/*
 * The hardening regression tier: property-based probing of every route of the manifest over
 * real HTTP against the local server, as an outsider would. Each generated request must be refused: it has
 * no valid credentials, a malformed Host, a malformed HTTP message, a path parameter or a body its route
 * rejects, or names another organization's (or no) object. For every one:
 * - never a 5xx; every 4xx is exactly `{"error": string}` (JSON);
 * - the status the refusal calls for (401 without valid credentials, 400 for a malformed Host, …);
 * - nothing stored changed: every table and the secret files are as before.
 *
 * FUZZ_RUNS sets the cases per route (default 100), FUZZ_SEED replays a run, FUZZ_REPORT names a file for
 * the counts of answers by status per route (they are also printed).
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 100);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

const h = localServerForFile();
let orgs: { a: OrgCredentials; b: OrgCredentials };
/** What each organization owns; the other's ids are "foreign" to it. */
let owned: { a: Owned; b: Owned };
interface Owned {
  applicationId: string;
  testId: string;
  runId: string;
  setupId: string;
}
/** appA's bundle `web` holds these keys: deleting one of them with A's credentials would succeed. */
const STORED_KEYS = ['API_TOKEN', 'constructor'];
let baseline: Record<string, string[]>;
const compiled = compileRoutes(routes);
const counts = new Map<RouteId, Map<number, number>>();

const validRecipesFile = () => ({
  version: 1,
  source: { discoverPath: 'd.json', scenariosPath: 's.md' },
  validationMode: 'sdk-check',
  recipes: [
    {
      name: 'r',
      description: 'd',
      create: { users: [{ _alias: 'u', name: 'n-{{testRunShortId}}' }] },
      validation: { status: 'validated', method: 'checkScenario', phase: 'ok' },
    },
  ],
});
const testFile = (name: string) => [
  {
    name,
    folder: { id: 'fuzz-folder', name: 'Fuzz' },
    application_version: { name: 'v1', path: '/v1' },
    variables: { EMAIL: 'e', constructor: 'c' },
    steps: [{ instruction: 'i', interaction: 'click', url: 'u', element: { html: '<b>', selector: 'b' } }],
  },
];

async function seed(org: OrgCredentials, repoFullName: string, setupId: string): Promise<Owned> {
  const { applicationId } = await createApplication({ orgId: org.orgId, repoFullName });
  const testId = (await importTests(org.orgId, testFile(`test of ${org.orgId}`))).tests[0]!.id;
  const run = await call(h, 'POST', `/test/${testId}/run`, {
    headers: client(org),
    body: { source: 'seed' },
  });
  const recipe = await call(h, 'POST', `/v1/setup/setups/${setupId}/scenario-recipe-versions`, {
    headers: bearer(org),
    body: validRecipesFile(),
  });
  expect([run.status, recipe.status]).toEqual([201, 201]);
  return { applicationId, testId, runId: run.body.run_id, setupId };
}

beforeAll(async () => {
  orgs = { a: h.org, b: await h.newOrg('fuzz-b') };
  owned = { a: await seed(orgs.a, 'acme/fuzz', 'setup-a'), b: await seed(orgs.b, 'other/fuzz', 'setup-b') };
  const bundle = await call(h, 'PUT', `/v1/preview/secrets/${owned.a.applicationId}/web`, {
    headers: bearer(orgs.a),
    body: { items: STORED_KEYS.map((key) => ({ key, value: `value of ${key}` })) },
  });
  expect(bundle.status).toBe(200);
  baseline = await snapshot(h.dataDir);
}, 60_000);

afterAll(async () => {
  const table = Object.fromEntries(
    [...counts].map(([id, byStatus]) => [
      id,
      Object.fromEntries([...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => [s, n])),
    ]),
  );
  const totals = new Map<number, number>();
  for (const byStatus of counts.values())
    for (const [s, n] of byStatus) totals.set(s, (totals.get(s) ?? 0) + n);
  const report = {
    runsPerRoute: RUNS,
    byRoute: table,
    total: Object.fromEntries([...totals].sort(([a], [b]) => a - b)),
  };
  console.log(`fuzz: answers by status per route\n${JSON.stringify(report, null, 2)}`);
  if (process.env.FUZZ_REPORT) writeFileSync(process.env.FUZZ_REPORT, `${JSON.stringify(report, null, 2)}\n`);
  closeSnapshots();
});

// ---------------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------------

type Who = 'a' | 'b';
/** Credentials as sent: valid ones of an org, or a kind of invalid ones. */
type Creds =
  | { kind: 'valid'; who: Who }
  | { kind: 'none' | 'garbage' | 'wrongSecret' | 'otherKind' | 'unknownId'; who: Who };

type Mode = 'anonymous' | 'badParam' | 'badBody' | 'foreign' | 'badHost' | 'malformedHttp' | 'anything';

const PROTO_NAMES = [
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
const latin1 = fc.oneof(
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
const extraHeaders = fc.array(fc.tuple(headerName, headerValue), { maxLength: 5 });

/** Percent-encode any string, lone surrogates included (as the UTF-8 of U+FFFD, as a browser would). */
const encode = (s: string): string => {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  }
};

/** The schema of each path parameter, as the handlers validate it: decides whether a value is valid. */
const schemaOf: Record<string, z.ZodMiniType> = {
  applicationId: rowId,
  setupId: rowId,
  test_id: rowId,
  run_id: rowId,
  app: appName,
  key: envVarKey,
  owner,
  repo,
  pr: prPath,
  // getRecipeVersion's `{version}`, as its route validates it.
  version: queryInteger(1, 1_000_000_000),
};
const validFormat: Record<string, fc.Arbitrary<string>> = {
  applicationId: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
  setupId: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
  test_id: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
  run_id: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
  app: fc.oneof(fc.constant('web'), fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?$/)),
  key: fc.oneof(
    fc.stringMatching(/^FZ_[A-Za-z0-9_]{0,20}$/),
    fc.constantFrom(...STORED_KEYS, ...PROTO_NAMES.filter((n) => n !== '__proto__')),
  ),
  owner: fc.stringMatching(/^[a-z0-9]{1,20}$/),
  repo: fc.stringMatching(/^[a-z0-9_-][a-z0-9._-]{0,30}$/),
  pr: fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: MAX_PR })).map(String),
  // A recipe version: 1 … 1e9 (the route's `queryInteger(1, 1_000_000_000)`).
  version: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 1_000_000_000 })).map(String),
};
const garbageSegment = fc.oneof(
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
const queryString = fc
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
const deepJson = fc
  .tuple(fc.integer({ min: 65, max: 20_000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
  .map(([depth, open, proto]) => {
    const close = open === '[' ? ']' : '}';
    return `${open.repeat(depth)}${proto ? '{"__proto__":{"x":1}}' : '1'}${close.repeat(depth)}`;
  });
const garbageText = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 200 })
  .filter((s) => s.trim() !== '' && !parses(s));
const invalidUtf8 = fc
  .tuple(fc.string({ maxLength: 20 }), fc.uint8Array({ minLength: 1, maxLength: 8 }))
  .map(([prefix, bytes]) =>
    Buffer.concat([Buffer.from(`{"value":"${prefix}`), Buffer.from([0xff, ...bytes])]),
  );
const nonObjectJson = fc
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
const withProto = (valid: () => unknown) =>
  fc.tuple(fc.jsonValue({ maxDepth: 2 }), fc.boolean()).map(([payload, nested]) => {
    const member = `"__proto__":${JSON.stringify(payload ?? null)}`;
    const text = JSON.stringify(valid());
    return nested
      ? text.replace(/^\{/, `{"extra":[{"deeper":{${member}}}],`)
      : text.replace(/^\{/, `{${member},`);
  });
const oversized = (max: number) =>
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

interface RouteBodies {
  /** A body the route accepts (sent only when something else makes the request invalid). */
  valid: () => unknown;
  /** JSON objects of the right shape with a wrong member (type, value or a missing required one). */
  wrongMembers: fc.Arbitrary<unknown>;
}
const nonString = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.object({ maxDepth: 1 }),
);
const badKey = fc.oneof(
  fc.string({ maxLength: 30 }).filter((k) => !envVarKey.safeParse(k).success),
  fc.constant('__proto__'),
);
const bodies: Partial<Record<RouteId, RouteBodies>> = {
  putSecret: {
    valid: () => ({ value: 'fuzz' }),
    wrongMembers: fc.oneof(
      nonString.map((value) => ({ value })),
      fc.constant({}),
      fc.string({ minLength: 65_537, maxLength: 65_600 }).map((value) => ({ value })),
    ),
  },
  putSecrets: {
    valid: () => ({ items: [{ key: 'FZ_VALID', value: 'fuzz' }] }),
    wrongMembers: fc.oneof(
      fc.constant({ items: [] }),
      fc.constant({}),
      nonString.filter((v) => !Array.isArray(v)).map((items) => ({ items })),
      fc.tuple(badKey, fc.string()).map(([key, value]) => ({ items: [{ key, value }] })),
      nonString.map((value) => ({ items: [{ key: 'FZ_A', value }] })),
      fc.constant({ items: [{ key: 'FZ_A', value: 'x' }, { value: 'y' }] }),
    ),
  },
  startRun: {
    valid: () => ({ source: 'fuzz', runtime_metadata: { constructor: 'x', EMAIL: 'y' } }),
    wrongMembers: fc.oneof(
      fc.oneof(nonString, fc.constant('')).map((source) => ({ source })),
      fc.oneof(nonString, fc.constant('')).map((application_version_id) => ({ application_version_id })),
      fc
        .oneof(fc.integer(), fc.string(), fc.array(fc.string(), { minLength: 1, maxLength: 2 }))
        .map((m) => ({ runtime_metadata: m })),
      fc.tuple(fc.constantFrom('EMAIL', 'constructor', 'toString'), nonString).map(([k, v]) => ({
        runtime_metadata: { [k]: v },
      })),
    ),
  },
  createRecipeVersion: {
    valid: validRecipesFile,
    wrongMembers: fc.oneof(
      fc.object({ maxDepth: 2 }).filter((o) => (o as { version?: unknown }).version !== 1),
      fc.jsonValue({ maxDepth: 2 }).map((v) => ({ ...validRecipesFile(), version: v === 1 ? 2 : v })),
      fc.constantFrom('source', 'validationMode', 'recipes').map((k) => {
        const f: Record<string, unknown> = validRecipesFile();
        delete f[k];
        return f;
      }),
      fc.string().map((alias) => {
        const f = validRecipesFile();
        f.recipes[0]!.create = {
          users: [{ _alias: 'u', name: `{{${alias}}}x` }],
          orders: [{ u: { _ref: `${alias}-missing` } }],
        } as never;
        return f;
      }),
    ),
  },
  createEnvironment: {
    valid: () => ({ repoFullName: 'acme/fuzz', prNumber: 1, headSha: 'abcdef1', headRef: 'main' }),
    wrongMembers: fc.oneof(
      fc.constant({}),
      nonString.map((repoFullName) => ({ repoFullName, prNumber: 1, headSha: 'abcdef1', headRef: 'main' })),
      fc.oneof(fc.constant(0), fc.constant(-1), fc.constant(1.5), fc.string()).map((prNumber) => ({
        repoFullName: 'acme/fuzz',
        prNumber,
        headSha: 'abcdef1',
        headRef: 'main',
      })),
      fc
        .string({ maxLength: 50 })
        .filter((s) => !/^[0-9a-f]{7,40}$/i.test(s))
        .map((headSha) => ({
          repoFullName: 'acme/fuzz',
          prNumber: 1,
          headSha,
          headRef: 'main',
        })),
    ),
  },
  updateApplication: {
    valid: () => ({ skipLabel: 'no-preview', paths: ['web/**'] }),
    wrongMembers: fc.oneof(
      fc.constant({}),
      fc.constant({ skipLabel: 'no-preview', bogus: 1 }),
      nonString.map((skipLabel) => ({ skipLabel })),
      nonString.filter((v) => !Array.isArray(v)).map((paths) => ({ paths })),
      fc.constantFrom('/etc/**', '../up', '!docs/**', 'a/./b').map((glob) => ({ paths: ['web/**', glob] })),
      fc
        .string({ maxLength: 30 })
        .filter((l) => !/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$/.test(l.trim()) && l.trim() !== '')
        .map((login) => ({ skipAuthors: [login] })),
      fc
        .string({ minLength: 51, maxLength: 80 })
        .filter((l) => l.trim().length > 50)
        .map((requireLabel) => ({ requireLabel })),
      fc.constant({ paths: Array.from({ length: 51 }, (_, i) => `d${i}/**`) }),
    ),
  },
  redeployApp: {
    valid: () => ({ mode: 'restart' }),
    wrongMembers: fc.oneof(
      fc
        .oneof(nonString, fc.string())
        .filter((m) => m !== 'rebuild' && m !== 'restart')
        .map((mode) => ({ mode })),
    ),
  },
};

const capOf = (id: RouteId) => (routes[id] as RouteDef).maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
/** A body the route refuses: [text or bytes, label]. */
const invalidBody = (id: RouteId): fc.Arbitrary<Buffer | string> =>
  fc.oneof(
    deepJson,
    garbageText,
    invalidUtf8,
    nonObjectJson,
    withProto(bodies[id]!.valid),
    oversized(capOf(id)),
    bodies[id]!.wrongMembers.map((b) => JSON.stringify(b)),
  );
/** Any body at all: a valid one, an invalid one, random JSON, none. */
const anyBody = (id: RouteId): fc.Arbitrary<Buffer | string | undefined> =>
  bodies[id]
    ? fc.oneof(
        fc.constant(JSON.stringify(bodies[id]!.valid())),
        invalidBody(id),
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
        fc.constant(undefined),
      )
    : fc.oneof(
        fc.constant(undefined),
        fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
        garbageText,
      );

const credsOf = (id: RouteId, c: Creds): [string, string][] => {
  const org = orgs[c.who];
  const apiKey = routes[id].auth === 'apiKey';
  switch (c.kind) {
    case 'valid':
      return Object.entries(apiKey ? bearer(org) : client(org));
    case 'none':
      return [];
    case 'garbage':
      return apiKey
        ? [['authorization', 'Bearer not-a-key']]
        : [
            ['svc-client-id', 'not an id'],
            ['svc-client-secret', 'x'],
          ];
    case 'wrongSecret':
      return apiKey
        ? [['authorization', `Bearer ${org.apiKey.slice(0, -43)}${'W'.repeat(43)}`]]
        : [
            ['svc-client-id', org.clientId],
            ['svc-client-secret', `${org.clientSecret}x`],
          ];
    case 'otherKind':
      return Object.entries(apiKey ? client(org) : bearer(org));
    case 'unknownId':
      return apiKey
        ? [['authorization', `Bearer pvk_fuzzfuzz_${'A'.repeat(43)}`]]
        : [
            ['svc-client-id', 'pvc_fuzzfuzz'],
            ['svc-client-secret', org.clientSecret],
          ];
  }
};

interface Case {
  mode: Mode;
  creds: Creds;
  method: string;
  /** Path parameters as written in the target. */
  segments: Record<string, string>;
  query: string;
  headers: [string, string][];
  /** The Host header: undefined for the server's own. */
  host?: string | null;
  body?: Buffer | string;
  /** For `malformedHttp`: what breaks the message. */
  breakage?: string;
}

const paramNames = (id: RouteId) => [...routes[id].path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
const isGet = (id: RouteId) => routes[id].method === 'GET';

/** Path parameter values a route's params may take: an own or foreign object's id, a valid-format one. */
const knownParam = (name: string): fc.Arbitrary<string> => {
  const ids = (o: Owned) =>
    ({ applicationId: o.applicationId, test_id: o.testId, run_id: o.runId, setupId: o.setupId })[name];
  const known = [ids(owned.a), ids(owned.b)].filter((v): v is string => v !== undefined);
  return known.length ? fc.oneof(fc.constantFrom(...known), validFormat[name]!) : validFormat[name]!;
};

function modesOf(id: RouteId): Mode[] {
  const modes: Mode[] = ['anonymous', 'badHost', 'malformedHttp', 'foreign'];
  if (paramNames(id).length) modes.push('badParam');
  if (bodies[id]) modes.push('badBody');
  if (isGet(id)) modes.push('anything');
  // A PR deploy names no object: with valid credentials only a bad body makes it a refusal.
  return id === 'createEnvironment' ? modes.filter((m) => m !== 'foreign') : modes;
}

const invalidCreds = fc.record({
  kind: fc.constantFrom('none', 'garbage', 'wrongSecret', 'otherKind', 'unknownId') as fc.Arbitrary<
    Exclude<Creds['kind'], 'valid'>
  >,
  who: fc.constantFrom<Who>('a', 'b'),
});
const validCreds = fc.record({ kind: fc.constant('valid' as const), who: fc.constantFrom<Who>('a', 'b') });

function caseOf(id: RouteId): fc.Arbitrary<Case> {
  const names = paramNames(id);
  const segmentsOf = (value: (name: string) => fc.Arbitrary<string>) =>
    names.length
      ? fc.record(Object.fromEntries(names.map((n) => [n, value(n)])) as Record<string, fc.Arbitrary<string>>)
      : fc.constant({} as Record<string, string>);
  const someValid = segmentsOf((n) => knownParam(n).map(encode));
  const common = {
    method: fc.constant(routes[id].method as string),
    query: queryString,
    headers: extraHeaders,
  };
  return fc.constantFrom(...modesOf(id)).chain((mode): fc.Arbitrary<Case> => {
    switch (mode) {
      case 'anonymous':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: invalidCreds,
          segments: fc.oneof(
            someValid,
            segmentsOf(() => garbageSegment),
          ),
          body: anyBody(id),
        });
      case 'badParam':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: validCreds,
          segments: fc
            .tuple(someValid, fc.constantFrom(...names), garbageSegment)
            .map(([valid, name, bad]) => ({ ...valid, [name]: bad })),
          body: anyBody(id),
        });
      case 'badBody':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: validCreds,
          segments: someValid,
          body: invalidBody(id),
        });
      case 'foreign':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: validCreds,
          segments: someValid,
          body: anyBody(id),
        });
      case 'badHost':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: fc.oneof(validCreds, invalidCreds),
          segments: someValid,
          body: anyBody(id),
          host: fc.oneof(
            fc.constantFrom('a b', '', '[::', 'a/b', 'user@host', '::1', 'host:port', '[::1', 'a b:80', 'é'),
            fc.string({ unit: latin1, maxLength: 30 }).filter((s) => !HOST_RE.test(s.trim())),
          ),
        });
      case 'malformedHttp':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: fc.oneof(validCreds, invalidCreds),
          segments: someValid,
          body: anyBody(id),
          breakage: fc.oneof(
            fc
              .string({ unit: latin1, minLength: 1, maxLength: 10 })
              .filter((n) => !n.includes(':'))
              .map((n) => `name:${n} x`),
            fc.constantFrom(
              'name:a(b)',
              'name:a@b',
              'name:é',
              'value:\x01',
              'value:\x7f',
              'value:a\x00b',
              'method:BREW',
              'method:G@T',
              'target:/a b',
              'version',
            ),
          ),
        });
      case 'anything':
        return fc.record({
          ...common,
          mode: fc.constant(mode),
          creds: fc.oneof(validCreds, invalidCreds),
          segments: fc.oneof(
            someValid,
            segmentsOf(() => garbageSegment),
          ),
          body: anyBody(id),
        });
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// What a case is, and what it must get
// ---------------------------------------------------------------------------------------------------

function targetOf(id: RouteId, c: Case): string {
  return routes[id].path.replace(/\{(\w+)\}/g, (_m, n: string) => c.segments[n]!) + c.query;
}

/** The route and parameters the server will see for a target (as lib/local/server.ts parses it). */
function effectiveRoute(method: string, target: string) {
  let path: string;
  try {
    path = new URL(`http://localhost${target}`).pathname;
  } catch {
    return undefined;
  }
  const m = matchRoute(compiled, method, path);
  return m ? { id: m.route.id as RouteId, params: m.params } : undefined;
}

/** Whether the request is refused whatever else it carries, and why (undefined: it might succeed). */
function refusal(id: RouteId, c: Case, params: Record<string, string>): string | undefined {
  if (c.mode === 'malformedHttp') return 'malformed HTTP';
  if (c.host !== undefined && (c.host === null || !HOST_RE.test(c.host.trim()))) return 'host';
  if (c.creds.kind !== 'valid') return 'credentials';
  // Extra headers may repeat a credential header with a bad value: still refused, then for that reason.
  if (Object.entries(params).some(([n, v]) => !schemaOf[n]!.safeParse(v).success)) return 'param';
  if (c.mode === 'badBody') return 'body';
  if (isGet(id)) return 'read-only';
  const mine = owned[c.creds.who];
  const theirs = owned[c.creds.who === 'a' ? 'b' : 'a'];
  switch (id) {
    case 'putSecret':
    case 'putSecrets':
    case 'deployMainBranch':
    case 'updateApplication':
      return params.applicationId !== mine.applicationId ? 'foreign' : undefined;
    case 'deleteSecret':
      if (params.applicationId !== mine.applicationId) return 'foreign';
      // Only A's bundle `web` exists, with STORED_KEYS: any other app or key is "not found".
      return c.creds.who === 'b' || params.app !== 'web' || !STORED_KEYS.includes(params.key!)
        ? 'missing'
        : undefined;
    case 'startRun':
      return params.test_id !== mine.testId ? 'foreign' : undefined;
    case 'createRecipeVersion':
      return params.setupId === theirs.setupId ? 'foreign' : undefined;
    case 'teardownEnvironment':
    case 'redeployEnvironment':
    case 'redeployApp':
      return 'no environment exists';
    default:
      return undefined;
  }
}

function requestOf(id: RouteId, c: Case) {
  let method = c.method;
  let target = targetOf(id, c);
  const headers: [string, string][] = [...c.headers, ...credsOf(id, c.creds)];
  const [what, detail] = c.breakage
    ? [c.breakage.slice(0, c.breakage.indexOf(':')), c.breakage.slice(c.breakage.indexOf(':') + 1)]
    : [];
  if (what === 'name') headers.unshift([detail!, 'x']);
  if (what === 'value') headers.unshift(['x-broken', detail!]);
  if (what === 'method') method = detail!;
  if (what === 'target') target = `${target}${detail}`;
  if (c.breakage === 'version') method = `${method} / HTTP/9.9\r\nx:`;
  return { method, target, headers, host: c.host, body: c.body };
}

const head = (r: ReturnType<typeof requestOf>) =>
  r.method.length + r.target.length + r.headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 0) + 200;

/** What differs between two snapshots: items gone and items new, per table or folder. */
function changes(before: Record<string, string[]>, after: Record<string, string[]>): string {
  const out: Record<string, { gone: string[]; new: string[] }> = {};
  for (const where of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = new Set(before[where] ?? []);
    const a = new Set(after[where] ?? []);
    const gone = [...b].filter((x) => !a.has(x));
    const added = [...a].filter((x) => !b.has(x));
    if (gone.length || added.length) out[where] = { gone, new: added };
  }
  return JSON.stringify(out).slice(0, 2_000);
}

function record(id: RouteId, status: number) {
  const byStatus = counts.get(id) ?? new Map<number, number>();
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  counts.set(id, byStatus);
}

async function check(id: RouteId, c: Case): Promise<void> {
  const req = requestOf(id, c);
  const effective = c.mode === 'malformedHttp' ? undefined : effectiveRoute(req.method, req.target);
  // A dot segment may resolve to another route: only cases whose refusal is certain are sent.
  if (effective && effective.id !== id) fc.pre(false);
  const why = refusal(id, c, effective?.params ?? {});
  fc.pre(why !== undefined || !effective);
  const res: RawResponse = await rawRequest(h.url, req);
  record(id, res.status);
  const seen = { status: res.status, body: res.text.slice(0, 300), why, mode: c.mode };

  if (res.status >= 500) throw new Error(`5xx: ${JSON.stringify(seen)}`);
  if (res.status >= 400) {
    if (!isErrorBody(res.json) || res.headers['content-type'] !== 'application/json')
      throw new Error(`a 4xx that is not {"error": string}: ${JSON.stringify(seen)}`);
  }
  const tooBig = head(req) > 12_000 && res.status === 431;
  const routed = effective !== undefined;
  let expected: number[];
  if (why === 'malformed HTTP') expected = [400, 431];
  else if (why === 'host') expected = [400, 431];
  else if (!routed) expected = [404, 400, 431];
  else if (why === 'credentials') expected = [401];
  else if (why === 'read-only') expected = [200, 400, 401, 404, 413];
  else if (why === 'no environment exists' && id === 'teardownEnvironment')
    expected = [202, 400, 401, 404, 413];
  else expected = [400, 401, 404, 413];
  if (!tooBig && !expected.includes(res.status))
    throw new Error(`expected ${expected.join('/')}: ${JSON.stringify(seen)}`);

  const now = await snapshot(h.dataDir);
  if (stableJson(now) !== stableJson(baseline))
    throw new Error(`stored state changed after ${JSON.stringify(seen)}: ${changes(baseline, now)}`);
}

describe(`every route refuses hostile requests (${RUNS} cases each), and nothing changes`, () => {
  test.each(routeIds.map((id) => [id]))(
    '%s',
    async (id) => {
      await fc.assert(
        fc.asyncProperty(caseOf(id), (c) => check(id, c)),
        { numRuns: RUNS, seed: SEED, maxSkipsPerRun: 1000, endOnFailure: true },
      );
    },
    Math.max(60_000, RUNS * 400),
  );
});

test('every route of the manifest was probed', () => {
  expect([...counts.keys()].sort()).toEqual([...routeIds].sort());
});
