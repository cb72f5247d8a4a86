import fc from 'fast-check';
import type * as z from 'zod/mini';
import type { OrgCredentials } from '../../functions/core/applications/applications.js';
import { type RouteId, routes } from '../../functions/manifest/routes.js';
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
import { bearer, client } from '../support/api.js';
import { encode, extraHeaders, garbageSegment, latin1, PROTO_NAMES, queryString } from './hostile-values.js';
import { anyBody, bodies, invalidBody } from './route-bodies.js';

/*
 * One generated case per request: how it is hostile (its mode), the credentials it carries, its path,
 * query, headers, Host and body; the request it becomes; and why it must be refused (or that it might not
 * be, when nothing makes it a refusal).
 */

export type Who = 'a' | 'b';
/** Credentials as sent: valid ones of an org, or a kind of invalid ones. */
export type Creds =
  | { kind: 'valid'; who: Who }
  | { kind: 'none' | 'garbage' | 'wrongSecret' | 'otherKind' | 'unknownId'; who: Who };

/** The two organizations' credentials: `b`'s objects are foreign to `a`, and `a`'s to `b`. */
export type Orgs = Record<Who, OrgCredentials>;
/** What each organization owns; the other's ids are "foreign" to it. */
export type Ownership = Record<Who, Owned>;

export type Mode =
  | 'anonymous'
  | 'badParam'
  | 'badBody'
  | 'foreign'
  | 'badHost'
  | 'malformedHttp'
  | 'anything';

export interface Owned {
  applicationId: string;
  testId: string;
  runId: string;
  setupId: string;
}
/** appA's bundle `web` holds these keys: deleting one of them with A's credentials would succeed. */
export const STORED_KEYS = ['API_TOKEN', 'constructor'];
const compiled = compileRoutes(routes);

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

const credsOf = (id: RouteId, c: Creds, orgs: Orgs): [string, string][] => {
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

export interface Case {
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
const knownParam = (name: string, owned: Ownership): fc.Arbitrary<string> => {
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

export function caseOf(id: RouteId, owned: Ownership): fc.Arbitrary<Case> {
  const names = paramNames(id);
  const segmentsOf = (value: (name: string) => fc.Arbitrary<string>) =>
    names.length
      ? fc.record(Object.fromEntries(names.map((n) => [n, value(n)])) as Record<string, fc.Arbitrary<string>>)
      : fc.constant({} as Record<string, string>);
  const someValid = segmentsOf((n) => knownParam(n, owned).map(encode));
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
export function effectiveRoute(method: string, target: string) {
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
export function refusal(
  id: RouteId,
  c: Case,
  params: Record<string, string>,
  owned: Ownership,
): string | undefined {
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

export function requestOf(id: RouteId, c: Case, orgs: Orgs) {
  let method = c.method;
  let target = targetOf(id, c);
  const headers: [string, string][] = [...c.headers, ...credsOf(id, c.creds, orgs)];
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

export const head = (r: ReturnType<typeof requestOf>) =>
  r.method.length + r.target.length + r.headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 0) + 200;
