import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { ValidationError } from '../../../functions/shared/errors.js';
import { call, client } from '../../support/api.js';
import { scanTable } from '../../support/stored-state.js';
import { clickStep, importOne, loginStep, runRoutesForFile, testDef } from './routes-fixture.js';

/*
 * Tests as stored and read: the import use case (`previewctl tests import`) and `GET /test/{test_id}`,
 * through real HTTP against the local server and dynalite.
 */

const { h } = runRoutesForFile();

describe('importTests (previewctl tests import)', () => {
  test('returns a new id per test, in file order', async () => {
    const out = await importTests(h.org.orgId, [testDef({ name: 'first' }), testDef({ name: 'second' })]);
    expect(out.tests.map((t) => t.name)).toEqual(['first', 'second']);
    expect(out.tests[0]!.id).toMatch(/^[a-z0-9]{20,}$/);
    expect(out.tests[0]!.id).not.toBe(out.tests[1]!.id);
  });

  test('variables default to {} and empty strings are stored', async () => {
    const id = await importOne(h.org, {
      variables: undefined,
      steps: [{ ...clickStep, url: '', element: { html: '', selector: '' } }],
    });
    const { Item } = await ddb().send(new GetCommand({ TableName: table('tests'), Key: { testId: id } }));
    expect(Item?.variables).toEqual({});
    expect(Item?.orgId).toBe(h.org.orgId);
    expect(Item?.steps[0].element).toEqual({ html: '', selector: '' });
  });

  test.each([
    ['not an array', { name: 'x' }, 'invalid tests file: Invalid input: expected array, received object'],
    ['an empty array', [], 'invalid tests file: must contain at least 1 test'],
    [
      'a step without a selector',
      [testDef({ steps: [loginStep, { ...clickStep, element: { html: '<b>' } }] })],
      'invalid tests file: [0].steps[1].element.selector: Invalid input: expected string, received undefined',
    ],
    [
      'a non-string variable',
      [testDef(), testDef({ variables: { EMAIL: 5 } })],
      'invalid tests file: [1].variables.EMAIL: Invalid input: expected string, received number',
    ],
    [
      'a folder id that is not an id',
      [testDef({ folder: { id: 'a b', name: 'x' } })],
      'invalid tests file: [0].folder.id: must be an id of letters, digits, - or _',
    ],
    [
      'a missing application version path',
      [testDef({ application_version: { name: 'v1' } })],
      'invalid tests file: [0].application_version.path: Invalid input: expected string, received undefined',
    ],
    [
      'a secret variable the test does not save',
      [testDef({ secret_variables: ['EMAIL', 'EMIAL'] })],
      "invalid tests file: [0].secret_variables[1]: EMIAL is not one of the test's variables",
    ],
  ])('rejects %s with a ValidationError naming the path', async (_label, file, message) => {
    const result = importTests(h.org.orgId, file);
    await expect(result).rejects.toThrow(ValidationError);
    await expect(result).rejects.toThrow(message);
  });

  // Hardening: user-chosen variable names that are Object property names.
  test('a variable named __proto__ is refused and nothing is stored', async () => {
    const before = await scanTable('tests');
    const file = [testDef({ variables: JSON.parse('{"EMAIL":"a","__proto__":"x"}') })];
    const result = importTests(h.org.orgId, file);
    await expect(result).rejects.toThrow(ValidationError);
    await expect(result).rejects.toThrow(/^invalid tests file: \[0\]\.variables\.__proto__: /);
    expect(await scanTable('tests')).toEqual(before);
  });

  test('variables named constructor, toString, hasOwnProperty are stored like any other', async () => {
    const variables = { constructor: 'c', toString: 't', hasOwnProperty: 'h', valueOf: 'v', EMAIL: 'e' };
    const id = await importOne(h.org, { variables });
    const { Item } = await ddb().send(new GetCommand({ TableName: table('tests'), Key: { testId: id } }));
    expect(Item?.variables).toEqual(variables);
    expect(Object.keys(Item?.variables).sort()).toEqual(Object.keys(variables).sort());
  });

  test('every problem of a file in one answer: the schema, an unknown key or application, a scenario, a size', async () => {
    const before = await scanTable('tests');
    const big = { ...clickStep, element: { html: 'x'.repeat(90_000), selector: 'b' } };
    const file = [
      testDef({ application_id: 'no-such-app' }),
      testDef({ name: '', steps: [{ ...clickStep, interaction: 3 }] }),
      testDef({ scenario: { setup_id: 'no-such-setup', recipe: 'r' } }),
      testDef({ steps: [big, big, big, big] }),
      testDef({ folder: { id: 'a b', name: 'x' }, variables: JSON.parse('{"__proto__":"x"}') }),
      // A misspelt key is refused by name, not dropped (it would silently lose the setting).
      testDef({ run_on_preveiw: true }),
    ];
    const result = importTests(h.org.orgId, file);
    await expect(result).rejects.toThrow(ValidationError);
    const message = await result.then(
      () => '',
      (err: Error) => err.message,
    );
    // In file order, each with its path.
    expect(message.split('; ')).toEqual([
      'invalid tests file: [0].application_id: no application no-such-app in this organization',
      '[1].name: must not be empty',
      '[1].steps[0].interaction: Invalid input: expected string, received number',
      expect.stringMatching(/^\[2\]\.scenario: .*no-such-setup/),
      '[3]: test is larger than 300000 bytes',
      '[4].variables.__proto__: must not be __proto__',
      '[4].folder.id: must be an id of letters, digits, - or _',
      '[5].run_on_preveiw: unknown key',
    ]);
    expect(await scanTable('tests')).toEqual(before);
  });

  test('rejects a test too large to store', async () => {
    const big = { ...clickStep, element: { html: 'x'.repeat(90_000), selector: 'b' } };
    await expect(importTests(h.org.orgId, [testDef({ steps: [big, big, big, big] })])).rejects.toThrow(
      'invalid tests file: [0]: test is larger than 300000 bytes',
    );
  });
});

describe('GET /test/{test_id}', () => {
  let testId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
  });

  test('returns the test without steps or variables by default', async () => {
    const res = await call(h, 'GET', `/test/${testId}`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: testId,
      name: 'Checkout works',
      created_at: expect.any(String),
      folder: { id: 'folder-checkout', name: 'Checkout' },
      application_version: { name: 'v1.2.0', path: '/builds/v1.2.0' },
    });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
    expect(Object.keys(res.body).sort()).toEqual([
      'application_version',
      'created_at',
      'folder',
      'id',
      'name',
    ]);
  });

  test('steps=false is the same as no steps', async () => {
    const res = await call(h, 'GET', `/test/${testId}?steps=false`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(res.body.steps).toBeUndefined();
  });

  test('steps=true adds the steps with generated ids', async () => {
    const res = await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(res.body.steps).toEqual([
      { id: expect.any(String), ...loginStep },
      { id: expect.any(String), ...clickStep },
    ]);
    expect(Object.keys(res.body.steps[0]).sort()).toEqual([
      'element',
      'id',
      'instruction',
      'interaction',
      'url',
    ]);
    expect(res.body.steps[0].id).not.toBe(res.body.steps[1].id);
    expect(res.body.variables).toBeUndefined();
  });

  test('steps must be true or false', async () => {
    const res = await call(h, 'GET', `/test/${testId}?steps=yes`, { headers: client(h.org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid query: steps: must be true or false' });
  });

  test('unknown test is 404', async () => {
    const res = await call(h, 'GET', '/test/doesnotexist', { headers: client(h.org) });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'test not found' });
  });

  test('a test id that is not an id is 400', async () => {
    const res = await call(h, 'GET', '/test/a.b', { headers: client(h.org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'invalid path: test_id: must be an id of letters, digits, - or _' });
  });
});
