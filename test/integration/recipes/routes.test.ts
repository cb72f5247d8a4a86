import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from '@jest/globals';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

const h = localServerForFile();

const path = (setupId: string) => `/v1/setup/setups/${setupId}/scenario-recipe-versions`;
let setupCounter = 0;
/** A setup id no other test uses. */
const newSetupId = () => `setup-${Date.now().toString(36)}-${++setupCounter}`;

const validFile = (): any => ({
  version: 1,
  source: {
    discoverPath: '~/.svc/projects/shop/discover.json',
    scenariosPath: '~/.svc/projects/shop/scenarios.md',
    planner: 'v2',
  },
  validationMode: 'sdk-check',
  recipes: [
    {
      name: 'user-with-order',
      description: 'a user who placed one order',
      create: {
        users: [{ _alias: 'buyer', username: 'u-{{testRunShortId}}', runId: '{{testRunId}}' }],
        orders: [{ userId: { _ref: 'buyer' }, lines: [{ sku: 'A', for: { _ref: 'buyer' } }] }],
      },
      variables: { legacy: { type: 'string' } },
      validation: { status: 'validated', method: 'checkScenario', phase: 'ok', up_ms: 40 },
    },
  ],
});
const withChange = (edit: (f: any) => void): any => {
  const f = validFile();
  edit(f);
  return f;
};
/** The valid file as raw text with `"version":1` written as `literal`. */
const withVersionLiteral = (literal: string): string => {
  const raw = JSON.stringify(validFile()).replace('"version":1,', `"version":${literal},`);
  expect(raw).toContain(`"version":${literal},`);
  return raw;
};

const upload = (setupId: string, body: unknown, org = h.org) =>
  call(h, 'POST', path(setupId), { body, headers: bearer(org) });

const stored = async (setupId: string, version: number) =>
  (await ddb().send(new GetCommand({ TableName: table('recipes'), Key: { setupId, version } }))).Item;

describe('POST /v1/setup/setups/{setupId}/scenario-recipe-versions', () => {
  test('201 with the version, counting up from 1 per setup', async () => {
    // Prepare
    const setupId = newSetupId();
    const other = newSetupId();
    // Act
    const first = await upload(setupId, validFile());
    const second = await upload(
      setupId,
      withChange((f) => f.recipes.push({ ...f.recipes[0], name: 'second' })),
    );
    const third = await upload(setupId, validFile());
    const elsewhere = await upload(other, validFile());
    // Assess
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ setupId, version: 1, recipeCount: 1, createdAt: expect.any(String) });
    expect(new Date(first.body.createdAt).toISOString()).toBe(first.body.createdAt);
    expect(second.status).toBe(201);
    expect(second.body).toEqual({ setupId, version: 2, recipeCount: 2, createdAt: expect.any(String) });
    expect(third.status).toBe(201);
    expect(third.body.version).toBe(3);
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body).toEqual({
      setupId: other,
      version: 1,
      recipeCount: 1,
      createdAt: expect.any(String),
    });
  });

  test('stores the file exactly as uploaded, extra keys and layout included', async () => {
    const setupId = newSetupId();
    const raw = JSON.stringify(
      withChange((f) => (f.extra = { kept: true })),
      null,
      2,
    );
    const res = await upload(setupId, raw);
    expect(res.status).toBe(201);
    expect(await stored(setupId, 1)).toEqual({
      setupId,
      version: 1,
      orgId: h.org.orgId,
      recipeCount: 1,
      createdAt: res.body.createdAt,
      fileJson: raw,
    });
    expect(await stored(setupId, 0)).toEqual({ setupId, version: 0, orgId: h.org.orgId, latestVersion: 1 });
  });

  test('concurrent uploads to one setup each get a distinct version', async () => {
    const setupId = newSetupId();
    const replies = await Promise.all(Array.from({ length: 10 }, () => upload(setupId, validFile())));
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(replies.map((r) => r.body.version).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const next = await upload(setupId, validFile());
    expect(next.body.version).toBe(11);
  });

  test.each([
    ['no credentials', (): Record<string, string> => ({})],
    ['a malformed key', () => ({ authorization: 'Bearer not-a-key' })],
    ['a well-formed unknown key', () => ({ authorization: `Bearer pvk_abcdefgh_${'A'.repeat(43)}` })],
    // The caller's real key id with another 43-character secret.
    ['a wrong secret', () => ({ authorization: `Bearer ${h.org.apiKey.slice(0, -43)}${'B'.repeat(43)}` })],
  ])('401 with %s, and nothing stored', async (_label, headers) => {
    const setupId = newSetupId();
    const res = await call(h, 'POST', path(setupId), { body: validFile(), headers: headers() });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      error:
        'missing or invalid credentials: this route takes an organization API key in the Authorization header (Bearer pvk_…)',
    });
    expect((await upload(setupId, validFile())).body.version).toBe(1);
  });

  test('400 for a setupId that is not a row id', async () => {
    const res = await upload('a.b', validFile());
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid path: setupId: must be an id of letters, digits, - or _' });
  });

  const INT_LITERAL = 'version must be a JSON integer (written without a fraction or exponent)';
  test.each([
    ['malformed JSON', '{"version":', 'request body is not valid JSON'],
    ['an empty body', '', 'request body is required'],
    ['an array body', '[]', 'recipes file must be a JSON object'],
    ['version as a string', withChange((f) => (f.version = '1')), 'version: must be the integer 1'],
    ['version 2', withChange((f) => (f.version = 2)), 'version: must be the integer 1'],
    ['version written 1.0', withVersionLiteral('1.0'), INT_LITERAL],
    ['version written 1e0', withVersionLiteral('1e0'), INT_LITERAL],
    ['no discoverPath', withChange((f) => delete f.source.discoverPath), 'source.discoverPath: required'],
    ['no scenariosPath', withChange((f) => delete f.source.scenariosPath), 'source.scenariosPath: required'],
    [
      'a bad validationMode',
      withChange((f) => (f.validationMode = 'manual')),
      'validationMode: must be sdk-check or endpoint-lifecycle',
    ],
    ['empty recipes', withChange((f) => (f.recipes = [])), 'recipes: must have at least 1 recipe'],
    [
      'an unknown token',
      withChange((f) => f.recipes[0].create.users.push({ name: 'Ann {{userId}}' })),
      'unknown token {{userId}} in recipes[0].create.users[1].name: tokens that resolve to nothing',
    ],
    [
      'a dangling ref',
      withChange((f) => (f.recipes[0].create.orders[0].accountId = { _ref: 'acct' })),
      '_ref "acct" in recipes[0].create.orders[0].accountId matches no _alias',
    ],
    [
      'a duplicate alias',
      withChange((f) => f.recipes[0].create.users.push({ _alias: 'buyer' })),
      'duplicate _alias "buyer" in recipes[0].create.users[1]: already declared by recipes[0].create.users[0]',
    ],
    [
      'a model that is not an array',
      withChange((f) => (f.recipes[0].create.shops = { name: 'x' })),
      'recipes[0].create.shops: must be an array of row objects',
    ],
    [
      'a model array holding a non-object',
      withChange((f) => (f.recipes[0].create.shops = ['x'])),
      'recipes[0].create.shops[0]: must be a row object',
    ],
    [
      'validation.status not validated',
      withChange((f) => (f.recipes[0].validation.status = 'draft')),
      'recipes[0].validation.status: must be "validated"',
    ],
    [
      'validation.phase not ok',
      withChange((f) => (f.recipes[0].validation.phase = 'up')),
      'recipes[0].validation.phase: must be "ok"',
    ],
  ])('400 for %s, and nothing stored', async (_label, body, message) => {
    // Prepare
    const setupId = newSetupId();
    expect((await upload(setupId, validFile())).body.version).toBe(1);
    // Act
    const res = await upload(setupId, body);
    // Assess
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: message });
    const next = await upload(setupId, validFile());
    expect(next.status).toBe(201);
    expect(next.body.version).toBe(2);
    expect(await stored(setupId, 3)).toBeUndefined();
  });

  test("another org's upload to a claimed setup is 404 and changes nothing", async () => {
    // Prepare
    const setupId = newSetupId();
    const other = await h.newOrg('recipes-other');
    expect((await upload(setupId, validFile())).body.version).toBe(1);
    // Act
    const foreign = await upload(setupId, validFile(), other);
    const foreignInvalid = await upload(
      setupId,
      withChange((f) => (f.recipes = [])),
      other,
    );
    // Assess
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ error: 'setup not found' });
    expect(foreignInvalid.status).toBe(400); // the file is judged first: nothing about the setup leaks
    expect(await stored(setupId, 0)).toEqual({ setupId, version: 0, orgId: h.org.orgId, latestVersion: 1 });
    const mine = await upload(setupId, validFile());
    expect(mine.body.version).toBe(2);
    const theirs = await upload(newSetupId(), validFile(), other);
    expect(theirs.status).toBe(201);
    expect(theirs.body.version).toBe(1);
  });

  test.each([
    ['a __proto__ member in create', (f: any) => (f.recipes[0].create = JSON.parse('{"__proto__":[{}]}'))],
    [
      'a __proto__ member in a row',
      (f: any) => (f.recipes[0].create.users[0] = JSON.parse('{"__proto__":{}}')),
    ],
  ])('400 for %s, and nothing stored', async (_label, edit) => {
    const setupId = newSetupId();
    // JSON.stringify writes an own __proto__ member as a member, as a hostile client would.
    const res = await upload(setupId, JSON.stringify(withChange(edit)));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'request body must not contain __proto__ members' });
    expect(await stored(setupId, 0)).toBeUndefined();
  });

  test('400 for a file nested deeper than 64 levels, and nothing stored', async () => {
    const setupId = newSetupId();
    let deep: unknown = 'leaf';
    for (let i = 0; i < 70; i++) deep = { d: deep };
    const res = await upload(
      setupId,
      withChange((f) => (f.recipes[0].create.users[0].profile = deep)),
    );
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'request body is nested too deeply: at most 64 levels of arrays and objects',
    });
    expect(await stored(setupId, 0)).toBeUndefined();
  });

  test('413 for a body over 350 KB (measured in bytes), and nothing stored', async () => {
    // Prepare
    const setupId = newSetupId();
    const big = (text: string) => withChange((f) => (f.recipes[0].description = text));
    // 180 Ki characters of a 2-byte character: under the limit in characters, over it in bytes.
    const multiByte = big('é'.repeat(180 * 1024));
    const ascii = big('x'.repeat(351 * 1024));
    // Act
    const tooBig = await upload(setupId, ascii);
    const tooManyBytes = await upload(setupId, multiByte);
    const nearLimit = await upload(setupId, big('y'.repeat(340 * 1024)));
    // Assess
    // The route's cap (manifest `maxBodyBytes`, enforced on the raw body before parsing) says it first.
    const error = { error: 'request body is too large: at most 358400 bytes (350 KB)' };
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toEqual(error);
    expect(tooManyBytes.status).toBe(413);
    expect(tooManyBytes.body).toEqual(error);
    expect(nearLimit.status).toBe(201);
    expect(nearLimit.body.version).toBe(1);
  }, 30_000);
});
