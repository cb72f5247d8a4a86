import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll } from '@jest/globals';
import type { OrgCredentials } from '../../../functions/core/applications/applications.js';
import type { RunStatus } from '../../../functions/core/runs/store.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { closeSnapshots } from '../../support/stored-state.js';

/*
 * What the test and run route files share (`definitions`, `start`, `reads`): the file's local server,
 * tests made with the import use case (`previewctl tests import`) in the test's process, which shares the
 * server's DynamoDB configuration, and the runs they start, read and move between statuses.
 */

/** The file's local server, and starting and awaiting runs through it. */
export function runRoutesForFile() {
  const h = localServerForFile();
  afterAll(async () => {
    closeSnapshots();
  });
  async function startRunOf(org: OrgCredentials, testId: string, body?: unknown) {
    return call(h, 'POST', `/test/${testId}/run`, { headers: client(org), body });
  }

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

  return { h, startRunOf, ended };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const loginStep = {
  instruction: 'Type {{variable:EMAIL}} into the email field',
  interaction: 'input-text',
  url: 'https://shop.example/login',
  element: { html: '<input id="email">', selector: '#email' },
};
export const clickStep = {
  instruction: 'Click Sign in',
  interaction: 'click',
  url: 'https://shop.example/login',
  element: { html: '<button>Sign in</button>', selector: 'button[type=submit]' },
};
export const testDef = (over: Record<string, unknown> = {}) => ({
  name: 'Checkout works',
  folder: { id: 'folder-checkout', name: 'Checkout' },
  application_version: { name: 'v1.2.0', path: '/builds/v1.2.0' },
  variables: { EMAIL: 'saved@example.com', PASSWORD: 'saved-password' },
  steps: [loginStep, clickStep],
  ...over,
});

export async function importOne(org: OrgCredentials, over: Record<string, unknown> = {}): Promise<string> {
  const out = await importTests(org.orgId, [testDef(over)]);
  return out.tests[0]!.id;
}

export async function storedRun(runId: string): Promise<Record<string, any> | undefined> {
  const { Item } = await ddb().send(new GetCommand({ TableName: table('runs'), Key: { runId } }));
  return Item;
}

/** The error of a run whose test has no application: it ends failed at once. */
export const NO_APPLICATION =
  'the test has no application: set application_id in the tests file, or import it with `previewctl tests import --app ID`';

/** Move a run to another status (and its status index keys), as if it had ended that way. */
export async function setRunStatus(orgId: string, runId: string, status: RunStatus): Promise<void> {
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

export const TEST_RUN_KEYS = [
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
