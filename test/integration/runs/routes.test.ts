import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import type { RunStatus } from '../../../functions/core/runs/store.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { ValidationError } from '../../../functions/shared/errors.js';
import { bearer, call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { closeSnapshots, scanTable } from '../../support/stored-state.js';

/*
 * Tests and runs (endpoints 12-15) through real HTTP against the local server and dynalite. Tests are
 * created with the import use case (`previewctl tests import`) in this process, which shares the server's
 * DynamoDB configuration.
 */

const h = localServerForFile();
afterAll(async () => {
  closeSnapshots();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const loginStep = {
  instruction: 'Type {{variable:EMAIL}} into the email field',
  interaction: 'input-text',
  url: 'https://shop.example/login',
  element: { html: '<input id="email">', selector: '#email' },
};
const clickStep = {
  instruction: 'Click Sign in',
  interaction: 'click',
  url: 'https://shop.example/login',
  element: { html: '<button>Sign in</button>', selector: 'button[type=submit]' },
};
const testDef = (over: Record<string, unknown> = {}) => ({
  name: 'Checkout works',
  folder: { id: 'folder-checkout', name: 'Checkout' },
  application_version: { name: 'v1.2.0', path: '/builds/v1.2.0' },
  variables: { EMAIL: 'saved@example.com', PASSWORD: 'saved-password' },
  steps: [loginStep, clickStep],
  ...over,
});

async function importOne(org: OrgCredentials, over: Record<string, unknown> = {}): Promise<string> {
  const out = await importTests(org.orgId, [testDef(over)]);
  return out.tests[0]!.id;
}

async function startRunOf(org: OrgCredentials, testId: string, body?: unknown) {
  return call(h, 'POST', `/test/${testId}/run`, { headers: client(org), body });
}

async function storedRun(runId: string): Promise<Record<string, any> | undefined> {
  const { Item } = await ddb().send(new GetCommand({ TableName: table('runs'), Key: { runId } }));
  return Item;
}

/** The error of a run whose test has no application: it ends failed at once. */
const NO_APPLICATION =
  'the test has no application: set application_id in the tests file, or import it with `previewctl tests import --app ID`';

/** Poll a run until it has ended (these tests have no application: each ends failed at once). */
async function ended(org: OrgCredentials, runId: string): Promise<Record<string, any>> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(org) });
    if (res.body?.status === 'passed' || res.body?.status === 'failed') return res.body;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not end: ${res.text}`);
    await sleep(50);
  }
}

/** Move a run to another status (and its status index keys), as if it had ended that way. */
async function setRunStatus(orgId: string, runId: string, status: RunStatus): Promise<void> {
  const run = await storedRun(runId);
  const k = keys.runs.statusKeys({ orgId, testId: run?.testId, folderId: run?.folder.id, status });
  await ddb().send(
    new UpdateCommand({
      TableName: table('runs'),
      Key: { runId },
      UpdateExpression: 'SET #s = :s, statusKey = :k, testStatusKey = :tk, folderStatusKey = :fk',
      ExpressionAttributeNames: { '#s': 'status' },
      ExpressionAttributeValues: {
        ':s': status,
        ':k': k.statusKey,
        ':tk': k.testStatusKey,
        ':fk': k.folderStatusKey,
      },
    }),
  );
}

const TEST_RUN_KEYS = [
  'created_at',
  'ended_at',
  'folder',
  'folder_run_id',
  'id',
  'job_id',
  'job_run_id',
  'metadata',
  'name',
  'report_url',
  'status',
  'test_id',
  'video_url',
].sort();

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

describe('authentication (client id and secret)', () => {
  let testId: string;
  let runId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
    runId = (await startRunOf(h.org, testId)).body.run_id;
  });
  // The same answer whatever was wrong, saying what the route takes.
  const unauthorized = {
    error:
      "missing or invalid credentials: this route takes an organization's client credentials in the svc-client-id and svc-client-secret headers",
  };

  test.each([
    ['GET /test/{test_id}', 'GET', () => `/test/${testId}`],
    ['POST /test/{test_id}/run', 'POST', () => `/test/${testId}/run`],
    ['GET /run', 'GET', () => '/run'],
    ['GET /run/{run_id}', 'GET', () => `/run/${runId}`],
  ])('%s: missing, wrong or Bearer credentials are 401', async (_label, method, path) => {
    const other = await h.newOrg();
    const attempts: Record<string, string>[] = [
      {},
      { 'svc-client-id': h.org.clientId },
      { 'svc-client-secret': h.org.clientSecret },
      { 'svc-client-id': h.org.clientId, 'svc-client-secret': 'wrong-secret' },
      { 'svc-client-id': h.org.clientId, 'svc-client-secret': other.clientSecret },
      { 'svc-client-id': 'pvc_unknownclient1', 'svc-client-secret': h.org.clientSecret },
      bearer(h.org),
    ];
    for (const headers of attempts) {
      const res = await call(h, method, path(), { headers });
      expect({ headers, status: res.status, body: res.body }).toEqual({
        headers,
        status: 401,
        body: unauthorized,
      });
    }
  });

  test('a rejected start creates no run', async () => {
    await call(h, 'POST', `/test/${testId}/run`, { headers: bearer(h.org) });
    const res = await call(h, 'GET', `/run?test=${testId}`, { headers: client(h.org) });
    expect(res.body.map((r: any) => r.id)).toEqual([runId]);
  });
});

describe('POST /test/{test_id}/run', () => {
  let testId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
  });

  test('201 with message, the run address and its id; empty body defaults source to api', async () => {
    const res = await call(h, 'POST', `/test/${testId}/run`, {
      headers: client(h.org),
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      message: 'test run created',
      // The run's report page, at a signed link.
      url: expect.stringMatching(
        new RegExp(`^${h.url}/report/${res.body.run_id}\\?expires=\\d+&sig=[\\w-]+$`),
      ),
      run_id: expect.stringMatching(/^[a-z0-9]{20,}$/),
    });

    await ended(h.org, res.body.run_id);
    const run = await call(h, 'GET', `/run/${res.body.run_id}`, { headers: client(h.org) });
    expect(run.status).toBe(200);
    expect(run.body).toEqual({
      id: res.body.run_id,
      name: 'Checkout works',
      test_id: testId,
      status: 'failed',
      error: NO_APPLICATION,
      created_at: expect.any(String),
      ended_at: expect.any(String),
      folder_run_id: null,
      job_run_id: null,
      job_id: null,
      folder: { id: 'folder-checkout', name: 'Checkout' },
      video_url: null,
      metadata: { source: 'api' },
      // A signed link to the run's report, minted on each read.
      report_url: expect.stringMatching(
        /^http:\/\/127\.0\.0\.1:\d+\/report\/[a-z0-9]+\?expires=\d+&sig=[\w-]+$/,
      ),
    });
    expect(Object.keys(run.body).sort()).toEqual([...TEST_RUN_KEYS, 'error'].sort());
  });

  test('{} is the same as no body', async () => {
    const res = await startRunOf(h.org, testId, {});
    expect(res.status).toBe(201);
    expect((await storedRun(res.body.run_id))?.source).toBe('api');
  });

  test('source and application_version_id land in metadata', async () => {
    const res = await startRunOf(h.org, testId, { source: 'ci', application_version_id: 'appver-7' });
    expect(res.status).toBe(201);
    const run = await call(h, 'GET', `/run/${res.body.run_id}`, { headers: client(h.org) });
    expect(run.body.metadata).toEqual({ source: 'ci', application_version_id: 'appver-7' });
  });

  test('variables the file marks secret are stored on the test and copied onto its runs', async () => {
    const marked = await importOne(h.org, { secret_variables: ['EMAIL', 'EMAIL'] });
    const { Item } = await ddb().send(new GetCommand({ TableName: table('tests'), Key: { testId: marked } }));
    expect(Item?.secretVariables).toEqual(['EMAIL']);
    const res = await startRunOf(h.org, marked);
    expect(res.status).toBe(201);
    expect((await storedRun(res.body.run_id))?.secretVariables).toEqual(['EMAIL']);
    // Files without the list stay valid, and their runs carry none.
    expect((await storedRun((await startRunOf(h.org, testId)).body.run_id))?.secretVariables).toBeUndefined();
  });

  test('runtime_metadata overrides saved variables by name and ignores unknown names', async () => {
    const res = await startRunOf(h.org, testId, {
      runtime_metadata: { EMAIL: 'run@example.com', UNKNOWN: 'ignored', toString: 'ignored' },
    });
    expect(res.status).toBe(201);
    const item = await storedRun(res.body.run_id);
    expect(item?.variables).toEqual({ EMAIL: 'run@example.com', PASSWORD: 'saved-password' });
    // The override is internal: it never reaches a response.
    const run = await call(h, 'GET', `/run/${res.body.run_id}?steps=true`, { headers: client(h.org) });
    expect(run.text).not.toContain('run@example.com');
    expect(run.text).not.toContain('saved-password');
  });

  // Hardening, user-chosen keys: a run override named `constructor` of a saved `constructor` variable made
  // the stored run a plain object whose own `constructor` was a string, which the DynamoDB client refused
  // (500).
  test('runtime_metadata named constructor/toString overrides saved variables of those names', async () => {
    const saved = { constructor: 'saved-c', toString: 'saved-t', hasOwnProperty: 'saved-h', EMAIL: 'e' };
    const id = await importOne(h.org, { variables: saved });
    const res = await startRunOf(h.org, id, {
      runtime_metadata: { constructor: 'run-c', toString: 'run-t', valueOf: 'ignored' },
    });
    expect(res.status).toBe(201);
    expect((await storedRun(res.body.run_id))?.variables).toEqual({
      constructor: 'run-c',
      toString: 'run-t',
      hasOwnProperty: 'saved-h',
      EMAIL: 'e',
    });
  });

  test('runtime_metadata with a __proto__ member is 400 and creates no run', async () => {
    // Runs started above end on their own (failed: no application): compare once they have.
    const deadline = Date.now() + 20_000;
    while ((await scanTable('runs')).some((r) => /"status":\{"S":"(pending|running)"\}/.test(r))) {
      if (Date.now() > deadline) throw new Error('runs did not end');
      await sleep(50);
    }
    const before = await scanTable('runs');
    for (const body of [
      '{"runtime_metadata":{"__proto__":{"EMAIL":"polluted"}}}',
      '{"runtime_metadata":{"__proto__":"x"}}',
    ]) {
      const res = await startRunOf(h.org, testId, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'request body must not contain __proto__ members' });
    }
    expect(await scanTable('runs')).toEqual(before);
  });

  test('without runtime_metadata the run keeps the saved variables', async () => {
    const res = await startRunOf(h.org, testId);
    expect((await storedRun(res.body.run_id))?.variables).toEqual({
      EMAIL: 'saved@example.com',
      PASSWORD: 'saved-password',
    });
  });

  test('the run item carries every index key', async () => {
    const res = await startRunOf(h.org, testId);
    const item = await storedRun(res.body.run_id);
    expect(item).toMatchObject({
      runId: res.body.run_id,
      orgId: h.org.orgId,
      testKey: `${h.org.orgId}#${testId}`,
      folderKey: `${h.org.orgId}#folder-checkout`,
      statusKey: `${h.org.orgId}#${item?.status}`,
      createdKey: `${item?.createdAt}#${res.body.run_id}`,
    });
  });

  test.each([
    ['malformed JSON', '{"source":', 'request body is not valid JSON'],
    ['an array', [], 'invalid request body: Invalid input: expected object, received array'],
    ['null', 'null', 'invalid request body: Invalid input: expected object, received null'],
    [
      'a non-string source',
      { source: 5 },
      'invalid request body: source: Invalid input: expected string, received number',
    ],
    ['an empty source', { source: '' }, 'invalid request body: source: must not be empty'],
    [
      'a non-string application_version_id',
      { application_version_id: 7 },
      'invalid request body: application_version_id: Invalid input: expected string, received number',
    ],
    [
      'runtime_metadata that is not an object',
      { runtime_metadata: 'EMAIL=x' },
      'invalid request body: runtime_metadata: Invalid input: expected record, received string',
    ],
    [
      'a non-string runtime_metadata value',
      { runtime_metadata: { EMAIL: 5 } },
      'invalid request body: runtime_metadata.EMAIL: Invalid input: expected string, received number',
    ],
  ])('%s is 400 and creates no run', async (_label, body, error) => {
    const other = await h.newOrg();
    const id = await importOne(other);
    const res = await startRunOf(other, id, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error });
    const list = await call(h, 'GET', '/run', { headers: client(other) });
    expect(list.body).toEqual([]);
  });

  test('unknown test is 404', async () => {
    const res = await startRunOf(h.org, 'doesnotexist');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'test not found' });
  });
});

describe('GET /run/{run_id}', () => {
  let testId: string;
  let runId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
    runId = (await startRunOf(h.org, testId)).body.run_id;
  });

  test('steps=true adds copies of the test steps (skipped: a run without an application never ran)', async () => {
    const testRes = await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(h.org) });
    await ended(h.org, runId);
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([...TEST_RUN_KEYS, 'error', 'steps'].sort());
    expect(res.body.steps).toEqual(
      testRes.body.steps.map((s: any) => ({
        id: s.id,
        instruction: s.instruction,
        interaction: s.interaction,
        output: '',
        status: 'skipped',
        url: s.url,
        element: s.element,
        image: null,
      })),
    );
    expect(Object.keys(res.body.steps[0]).sort()).toEqual(
      ['element', 'id', 'image', 'instruction', 'interaction', 'output', 'status', 'url'].sort(),
    );
  });

  test('steps=false and media=true: no steps, and no video until the run has one', async () => {
    const res = await call(h, 'GET', `/run/${runId}?steps=false&media=true`, { headers: client(h.org) });
    expect(res.status).toBe(200);
    expect(res.body.steps).toBeUndefined();
    expect(res.body.video_url).toBeNull();
  });

  test.each([
    ['media=yes', 'invalid query: media: must be true or false'],
    ['steps=1', 'invalid query: steps: must be true or false'],
    ['steps=TRUE', 'invalid query: steps: must be true or false'],
  ])('%s is 400', async (q, error) => {
    const res = await call(h, 'GET', `/run/${runId}?${q}`, { headers: client(h.org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error });
  });

  test('unknown run is 404', async () => {
    const res = await call(h, 'GET', '/run/doesnotexist', { headers: client(h.org) });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'run not found' });
  });
});

describe('cross-organization', () => {
  let other: OrgCredentials;
  let testId: string;
  let runId: string;
  beforeAll(async () => {
    testId = await importOne(h.org);
    runId = (await startRunOf(h.org, testId)).body.run_id;
    other = await h.newOrg('org-b');
  });

  test("another org's test is 404 to read and to run", async () => {
    const get = await call(h, 'GET', `/test/${testId}?steps=true`, { headers: client(other) });
    expect(get.status).toBe(404);
    expect(get.body).toEqual({ error: 'test not found' });
    const run = await startRunOf(other, testId, { runtime_metadata: { EMAIL: 'x' } });
    expect(run.status).toBe(404);
    expect(run.body).toEqual({ error: 'test not found' });
  });

  test("another org's run is 404", async () => {
    const res = await call(h, 'GET', `/run/${runId}?steps=true`, { headers: client(other) });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'run not found' });
  });

  test("another org's list is empty, with or without filters", async () => {
    for (const q of ['', `?test=${testId}`, '?folder=folder-checkout', '?status=pending']) {
      const res = await call(h, 'GET', `/run${q}`, { headers: client(other) });
      expect({ q, status: res.status, body: res.body }).toEqual({ q, status: 200, body: [] });
    }
  });
});

describe('GET /run', () => {
  // An org of its own, so every count and order below is exact.
  let org: OrgCredentials;
  let testA: string;
  let testB: string;
  let testC: string;
  /** Run ids in creation order. */
  const created: string[] = [];
  const runsOf: Record<string, string[]> = {};
  const newestFirst = (ids: string[]) => created.filter((id) => ids.includes(id)).reverse();
  const list = async (q: string) => {
    const res = await call(h, 'GET', `/run${q}`, { headers: client(org) });
    expect(res.status).toBe(200);
    return res.body as any[];
  };
  const ids = async (q: string) => (await list(q)).map((r) => r.id as string);

  beforeAll(async () => {
    org = await h.newOrg('lister');
    testA = await importOne(org, { name: 'A', folder: { id: 'f1', name: 'Folder one' } });
    testB = await importOne(org, { name: 'B', folder: { id: 'f1', name: 'Folder one' } });
    testC = await importOne(org, { name: 'C', folder: { id: 'f2', name: 'Folder two' } });
    const plan: [string, number][] = [
      [testA, 25],
      [testB, 3],
      [testC, 2],
    ];
    for (const [testId, n] of plan) {
      runsOf[testId] = [];
      for (let i = 0; i < n; i++) {
        const res = await startRunOf(org, testId);
        expect(res.status).toBe(201);
        created.push(res.body.run_id);
        runsOf[testId]!.push(res.body.run_id);
        await sleep(2); // distinct created_at, so "newest first" is the creation order reversed
      }
    }
    // Each ends failed at once (no application); then a few are moved to the other statuses.
    for (const id of created) await ended(org, id);
    await setRunStatus(org.orgId, runsOf[testB]![0]!, 'passed');
    await setRunStatus(org.orgId, runsOf[testC]![0]!, 'passed');
    await setRunStatus(org.orgId, runsOf[testA]![3]!, 'pending');
    await setRunStatus(org.orgId, runsOf[testB]![1]!, 'running');
  }, 90_000);

  test('default: the 20 newest runs of the org, each a TestRun without steps', async () => {
    const runs = await list('');
    expect(runs.map((r) => r.id)).toEqual(newestFirst(created).slice(0, 20));
    for (const r of runs)
      expect(Object.keys(r).sort()).toEqual(
        r.status === 'failed' ? [...TEST_RUN_KEYS, 'error'].sort() : TEST_RUN_KEYS,
      );
    expect(runs[0]).toEqual({
      id: runsOf[testC]![1],
      name: 'C',
      test_id: testC,
      status: 'failed',
      error: NO_APPLICATION,
      created_at: expect.any(String),
      ended_at: expect.any(String),
      folder_run_id: null,
      job_run_id: null,
      job_id: null,
      folder: { id: 'f2', name: 'Folder two' },
      video_url: null,
      metadata: { source: 'api' },
      report_url: expect.stringMatching(/\/report\/[a-z0-9]+\?expires=\d+&sig=[\w-]+$/),
    });
  });

  test('created_at is strictly decreasing', async () => {
    const runs = await list('?limit=100');
    expect(runs).toHaveLength(30);
    for (let i = 1; i < runs.length; i++) expect(runs[i - 1].created_at > runs[i].created_at).toBe(true);
  });

  test('limit and offset walk the whole list without overlap', async () => {
    const walked: string[] = [];
    for (let offset = 0; offset < 35; offset += 7) walked.push(...(await ids(`?limit=7&offset=${offset}`)));
    expect(walked).toEqual(newestFirst(created));
    expect(await ids('?offset=30')).toEqual([]);
    expect(await ids('?limit=1&offset=29')).toEqual([created[0]]);
    expect(await ids('?offset=25')).toEqual(newestFirst(created).slice(25));
  });

  test('steps=true and media=true shape every item', async () => {
    const runs = await list(`?test=${testC}&steps=true&media=true`);
    expect(runs).toHaveLength(2);
    for (const r of runs) {
      expect(r.video_url).toBeNull();
      expect(r.steps.map((s: any) => [s.instruction, s.status, s.output, s.image])).toEqual([
        [loginStep.instruction, 'skipped', '', null],
        [clickStep.instruction, 'skipped', '', null],
      ]);
    }
  });

  test('filter by test', async () => {
    expect(await ids(`?test=${testA}`)).toEqual(newestFirst(runsOf[testA]!).slice(0, 20));
    expect(await ids(`?test=${testA}&limit=100`)).toEqual(newestFirst(runsOf[testA]!));
    expect(await ids(`?test=${testB}&offset=1&limit=1`)).toEqual([runsOf[testB]![1]]);
    expect(await ids('?test=unknowntest')).toEqual([]);
  });

  test('filter by folder', async () => {
    const f1 = [...runsOf[testA]!, ...runsOf[testB]!];
    expect(await ids('?folder=f1&limit=100')).toEqual(newestFirst(f1));
    expect(await ids('?folder=f2')).toEqual(newestFirst(runsOf[testC]!));
    expect(await ids('?folder=f1&limit=2&offset=2')).toEqual(newestFirst(f1).slice(2, 4));
  });

  test('filter by status', async () => {
    expect(await ids('?status=passed')).toEqual([runsOf[testC]![0], runsOf[testB]![0]]);
    expect(await ids('?status=pending')).toEqual([runsOf[testA]![3]]);
    expect(await ids('?status=running')).toEqual([runsOf[testB]![1]]);
    const changed = [runsOf[testB]![0]!, runsOf[testC]![0]!, runsOf[testA]![3]!, runsOf[testB]![1]!];
    const failed = created.filter((id) => !changed.includes(id));
    expect(await ids('?status=failed&limit=100')).toEqual(newestFirst(failed));
    const passed = await list('?status=passed');
    expect(passed.map((r) => r.status)).toEqual(['passed', 'passed']);
  });

  test('filters combine', async () => {
    expect(await ids('?folder=f1&status=passed')).toEqual([runsOf[testB]![0]]);
    expect(await ids(`?test=${testA}&status=pending`)).toEqual([runsOf[testA]![3]]);
    expect(await ids(`?test=${testA}&folder=f2`)).toEqual([]);
    expect(await ids(`?test=${testC}&folder=f2&status=passed`)).toEqual([runsOf[testC]![0]]);
    const failedA = runsOf[testA]!.filter((id) => id !== runsOf[testA]![3]);
    expect(await ids(`?test=${testA}&folder=f1&status=failed&limit=5&offset=20`)).toEqual(
      newestFirst(failedA).slice(20, 25),
    );
  });

  test('an unknown query parameter is a 400 naming it (a misspelt filter never lists everything)', async () => {
    const before = await scanTable('runs');
    const takes = 'limit, offset, test, folder, status, media, steps, flaky, healed, cursor';
    for (const [q, named] of [
      [`?limit=3&stauts=passed`, '"stauts"'],
      [`?tset=${testA}&colour=blue`, '"tset", "colour"'],
      ['?constructor=1', '"constructor"'],
    ] as const) {
      const res = await call(h, 'GET', `/run${q}`, { headers: client(org) });
      expect([q, res.status, res.body]).toEqual([
        q,
        400,
        { error: `invalid query: unknown parameter ${named} (GET /run takes ${takes})` },
      ]);
    }
    expect(await scanTable('runs')).toEqual(before);
    // Spelt right, the same filter lists only its runs.
    expect(await ids('?limit=3&status=passed')).toEqual(
      newestFirst([runsOf[testB]![0]!, runsOf[testC]![0]!]),
    );
  });

  test('queries the index of exactly the filtered runs backwards and never scans', async () => {
    const client_ = ddb();
    const spy = jest.spyOn(client_, 'send');
    try {
      const cases: [string, string, string][] = [
        [`?test=${testA}&folder=f1&status=failed`, 'listTestStatus', `${org.orgId}#${testA}#failed`],
        ['?folder=f1&status=passed', 'listFolderStatus', `${org.orgId}#f1#passed`],
        ['?status=running', 'listStatus', `${org.orgId}#running`],
        ['', 'listOrg', org.orgId],
      ];
      for (const [q, index, key] of cases) {
        spy.mockClear();
        await list(q);
        const inputs = spy.mock.calls.map((c) => (c[0] as any).input);
        const names = spy.mock.calls.map((c) => (c[0] as any).constructor.name);
        expect(names.filter((n) => n === 'ScanCommand')).toEqual([]);
        const queries = inputs.filter((i) => i.IndexName !== undefined);
        expect(queries.length).toBeGreaterThan(0);
        for (const input of queries) {
          // The listing index, or the page index beside it (same keys, carrying what a page shows).
          expect([index, index.replace(/^list/, 'page')]).toContain(input.IndexName);
          expect(input).toMatchObject({
            ScanIndexForward: false,
            ExpressionAttributeValues: { ':k': key },
          });
        }
      }
    } finally {
      spy.mockRestore();
    }
  });

  test.each([
    ['limit=0', 'limit: must be an integer from 1 to 100'],
    ['limit=101', 'limit: must be an integer from 1 to 100'],
    ['limit=abc', 'limit: must be an integer from 1 to 100'],
    ['limit=1.5', 'limit: must be an integer from 1 to 100'],
    ['limit=-1', 'limit: must be an integer from 1 to 100'],
    ['limit=', 'limit: must be an integer from 1 to 100'],
    ['offset=-1', 'offset: must be an integer >= 0'],
    ['offset=1e3', 'offset: must be an integer >= 0'],
    ['status=done', 'status: must be pending, running, passed or failed'],
    ['media=yes', 'media: must be true or false'],
    ['steps=1', 'steps: must be true or false'],
    ['test=a.b', 'test: must be an id of letters, digits, - or _'],
    ['folder=a%20b', 'folder: must be an id of letters, digits, - or _'],
  ])('%s is 400 naming the parameter', async (q, error) => {
    const res = await call(h, 'GET', `/run?${q}`, { headers: client(org) });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: `invalid query: ${error}` });
  });

  test('limit=100 and limit=1 are accepted', async () => {
    expect(await ids('?limit=100')).toHaveLength(30);
    expect(await ids('?limit=1')).toEqual([created[created.length - 1]]);
  });
});
