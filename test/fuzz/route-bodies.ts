import fc from 'fast-check';
import {
  DEFAULT_MAX_BODY_BYTES,
  type RouteDef,
  type RouteId,
  routes,
} from '../../functions/manifest/routes.js';
import { envVarKey } from '../../functions/shared/validation.js';
import { deepJson, garbageText, invalidUtf8, nonObjectJson, oversized, withProto } from './hostile-values.js';

/*
 * The bodies of the routes that take one: a valid body each (sent only when something else makes the
 * request invalid), the wrong members its schema refuses, and from them the bodies a route must refuse.
 */

/** A valid recipes file (`POST /v1/setup/setups/{setupId}/scenario-recipe-versions`). */
export const validRecipesFile = () => ({
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
export const bodies: Partial<Record<RouteId, RouteBodies>> = {
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
export const invalidBody = (id: RouteId): fc.Arbitrary<Buffer | string> =>
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
export const anyBody = (id: RouteId): fc.Arbitrary<Buffer | string | undefined> =>
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
