import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call, client } from '../../support/api.js';
import { scanTable } from '../../support/stored-state.js';
import {
  importOne,
  NO_APPLICATION,
  runRoutesForFile,
  sleep,
  storedRun,
  TEST_RUN_KEYS,
} from './routes-fixture.js';

/*
 * Starting a run: the client credentials a run's routes take, and `POST /test/{test_id}/run`, through real
 * HTTP against the local server and dynalite.
 */

const { h, startRunOf, ended } = runRoutesForFile();

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
