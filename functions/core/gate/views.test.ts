import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import { keys } from '../../manifest/tables.js';
import { commitView, latestGate } from './views.js';

/*
 * The gate's read views from what is stored: the latest head's state (the environment's `gate` field)
 * and one head's view (the dashboard's per-commit view). DynamoDB at the SDK boundary: items by key.
 */
useAwsSettings();

const OLD = 'a'.repeat(40);
const HEAD = 'b'.repeat(40);
const REF = { orgId: 'org-1', envKey: 'acme/web#7' };
const dynamo = mockClient(DynamoDBDocumentClient);
let items: Record<string, Record<string, unknown>>;

const run = (runId: string, testId: string, status: string, extra: Record<string, unknown> = {}) => ({
  runId,
  orgId: 'org-1',
  testId,
  applicationId: 'app-1',
  name: `Test ${testId}`,
  status,
  createdAt: '2030-01-01T00:00:00.000Z',
  startedAt: '2030-01-01T00:00:01.000Z',
  ...(status === 'passed' || status === 'failed' ? { endedAt: '2030-01-01T00:00:03.500Z' } : {}),
  folder: { id: 'f', name: 'F' },
  source: 'preview',
  steps: [],
  ...extra,
});
const record = (sha: string, extra: Record<string, unknown> = {}) => ({
  pk: keys.gates.checkRun('org-1', 'acme/web#7', sha),
  orgId: 'org-1',
  envKey: 'acme/web#7',
  repoFullName: 'acme/web',
  prNumber: 7,
  sha,
  story: 1,
  state: 'queued',
  createdAt: '2030-01-01T00:00:00.000Z',
  ...extra,
});

beforeEach(() => {
  dynamo.reset();
  items = {};
  dynamo.on(GetCommand).callsFake(async (input: { TableName: string; Key: Record<string, string> }) => {
    const key = input.TableName === 't-runs' ? `run:${input.Key.runId}` : String(input.Key.pk);
    const item = items[key];
    return { Item: item ? structuredClone(item) : undefined };
  });
});
const put = (key: string, item: Record<string, unknown>) => {
  items[key] = item;
};

describe('latestGate', () => {
  test('none when the pull request never reached the gate (no run_on_preview tests)', async () => {
    expect(await latestGate(REF)).toBeUndefined();
  });

  test("the latest head's check run: status, conclusion, the title it shows, the head", async () => {
    put(keys.gates.pullRequest('org-1', 'acme/web#7'), { pk: 'p', sha: HEAD });
    put(keys.gates.checkRun('org-1', 'acme/web#7', OLD), record(OLD, { state: 'completed' }));
    put(
      keys.gates.checkRun('org-1', 'acme/web#7', HEAD),
      record(HEAD, { state: 'completed', conclusion: 'failure', runIds: ['r1', 'r2'] }),
    );
    put('run:r1', run('r1', 't1', 'passed'));
    put('run:r2', run('r2', 't2', 'failed', { error: 'no heading' }));
    expect(await latestGate(REF)).toEqual({
      status: 'completed',
      conclusion: 'failure',
      title: '1 test failed of 2',
      headSha: HEAD,
    });
  });

  test('while the runs run: in_progress, counting those done, no conclusion', async () => {
    put(keys.gates.pullRequest('org-1', 'acme/web#7'), { pk: 'p', sha: HEAD });
    put(
      keys.gates.checkRun('org-1', 'acme/web#7', HEAD),
      record(HEAD, { state: 'in_progress', runIds: ['r1', 'r2'] }),
    );
    put('run:r1', run('r1', 't1', 'passed'));
    put('run:r2', run('r2', 't2', 'running'));
    expect(await latestGate(REF)).toEqual({
      status: 'in_progress',
      title: 'Running: 1 of 2 tests done',
      headSha: HEAD,
    });
  });
});

describe('commitView', () => {
  test('undefined for a head with no check run', async () => {
    expect(await commitView(REF, HEAD)).toBeUndefined();
    expect(await commitView(REF, undefined)).toBeUndefined();
  });

  test('each run with duration, retries, failed step, report link; kept results before fresh ones', async () => {
    put(
      keys.gates.checkRun('org-1', 'acme/web#7', HEAD),
      record(HEAD, {
        story: 2,
        state: 'completed',
        conclusion: 'success',
        completedAt: '2030-01-01T00:00:05.000Z',
        runIds: ['r3'],
        keptRunIds: ['r1', 'r2'],
      }),
    );
    put('run:r1', run('r1', 't1', 'passed', { attempts: [{}, {}], flaky: true }));
    put('run:r2', run('r2', 't2', 'failed'));
    put('run:r3', run('r3', 't2', 'passed'));
    const view = await commitView(REF, HEAD.toUpperCase(), async (id) => `https://x.test/report/${id}?sig=s`);
    expect(view).toEqual({
      repoFullName: 'acme/web',
      prNumber: 7,
      sha: HEAD,
      story: 2,
      status: 'completed',
      conclusion: 'success',
      title: '2 tests passed, 1 flaky',
      completedAt: '2030-01-01T00:00:05.000Z',
      runs: [
        expect.objectContaining({ runId: 'r1', retries: 1, flaky: true, durationMs: 2500 }),
        expect.objectContaining({ runId: 'r3', testId: 't2', status: 'passed', retries: 0 }),
      ],
    });
    expect(view!.runs.map((r) => r.reportUrl)).toEqual([
      'https://x.test/report/r1?sig=s',
      'https://x.test/report/r3?sig=s',
    ]);
  });

  test('a skip names who and why; a quarantined failure carries its owner and end', async () => {
    const until = new Date(Date.now() + 86_400_000).toISOString();
    put(keys.gates.pullRequest('org-1', 'acme/web#7'), { pk: 'p', sha: HEAD });
    put(
      keys.gates.checkRun('org-1', 'acme/web#7', HEAD),
      record(HEAD, {
        state: 'completed',
        conclusion: 'neutral',
        end: { kind: 'skipped', by: 'octocat', reason: 'docs only' },
        runIds: ['r1'],
      }),
    );
    put(keys.gates.quarantine('org-1', 'app-1'), {
      orgId: 'org-1',
      tests: { t1: { owner: 'alice', reason: 'flaky login', until, since: '2030-01-01T00:00:00.000Z' } },
    });
    put(
      'run:r1',
      run('r1', 't1', 'failed', {
        endedAt: new Date().toISOString(),
        error: 'timed out',
        steps: [{ interaction: 'click', status: 'failed', output: 'no button' }],
      }),
    );
    const view = await commitView(REF, undefined);
    expect(view).toMatchObject({
      status: 'completed',
      conclusion: 'neutral',
      title: 'Skipped by octocat: docs only',
      end: { kind: 'skipped', by: 'octocat', reason: 'docs only' },
    });
    expect(view!.runs).toEqual([
      expect.objectContaining({
        runId: 'r1',
        status: 'failed',
        error: 'timed out',
        failedStep: { number: 1, interaction: 'click' },
        quarantine: { owner: 'alice', reason: 'flaky login', until },
      }),
    ]);
    expect(view!.runs[0]).not.toHaveProperty('reportUrl');
  });

  test('a report link that cannot be minted is left out, the view still answers', async () => {
    put(keys.gates.checkRun('org-1', 'acme/web#7', HEAD), record(HEAD, { runIds: ['r1'] }));
    put('run:r1', run('r1', 't1', 'running'));
    const view = await commitView(REF, HEAD, async () => {
      throw new Error('no key');
    });
    expect(view).toMatchObject({ status: 'queued', title: 'Running: 0 of 1 test done' });
    expect(view!.runs[0]).not.toHaveProperty('reportUrl');
    expect(view!.runs[0]).not.toHaveProperty('durationMs');
  });
});
