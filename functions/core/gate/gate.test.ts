import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import type { CheckRunWrite } from '../../ports/pr-status/port.js';
import type { Environment } from '../environments/index.js';
import { attachRuns, bring, externalIdOf, type GateDeps, type GateRecord } from './gate.js';

/*
 * Two writers bringing the same head's check run at once (a deploy request beside a webhook, two runs
 * ending together): one creates it on GitHub and the other waits for its claim, then finds the record
 * showing what it would write, so the head gets one check run. DynamoDB at the SDK boundary: a record in
 * memory whose claim honours its condition as DynamoDB would.
 */
useAwsSettings();

const SHA = 'a'.repeat(40);
const dynamo = mockClient(DynamoDBDocumentClient);
let stored: GateRecord & Record<string, unknown>;
/** The runs table, by run id. */
let runs: Record<string, Record<string, unknown>>;
const tick = () => new Promise((r) => setTimeout(r, 5));

beforeEach(() => {
  dynamo.reset();
  runs = {};
  stored = {
    pk: `CHECK#org-1#acme/web#7#${SHA}`,
    orgId: 'org-1',
    envKey: 'acme/web#7',
    repoFullName: 'acme/web',
    prNumber: 7,
    sha: SHA,
    story: 1,
    state: 'queued',
    createdAt: '2030-01-01T00:00:00.000Z',
  };
  dynamo.on(GetCommand).callsFake(async (input: { TableName: string; Key: Record<string, string> }) => {
    await tick();
    if (input.TableName === 't-runs') {
      const run = runs[input.Key.runId!];
      return { Item: run ? structuredClone(run) : undefined };
    }
    if (input.TableName === 't-environments')
      return {
        Item: {
          orgId: 'org-1',
          envKey: 'acme/web#7',
          prNumber: 7,
          status: 'deploying',
          inputs: { headSha: SHA },
        },
      };
    return { Item: structuredClone(stored) };
  });
  dynamo
    .on(UpdateCommand)
    .callsFake(async (input: { UpdateExpression: string; ExpressionAttributeValues: any }) => {
      await tick();
      const v = input.ExpressionAttributeValues;
      const fail = () => {
        throw new ConditionalCheckFailedException({ message: 'conditional', $metadata: {} });
      };
      if (input.UpdateExpression.startsWith('SET writer')) {
        if (stored.writer !== undefined && (stored.writerUntil as number) >= v[':now']) fail();
        Object.assign(stored, { writer: v[':token'], writerUntil: v[':until'] });
        return {};
      }
      if (input.UpdateExpression.startsWith('REMOVE writer')) {
        if (stored.writer !== v[':token']) fail();
        delete stored.writer;
        delete stored.writerUntil;
        return {};
      }
      // nextStory: conditioned on the story it saw.
      if (input.UpdateExpression.startsWith('SET story')) {
        if (stored.story !== v[':story']) fail();
        for (const k of ['checkRunId', 'runIds', 'conclusion', 'end', 'shown', 'completedAt', 'keptRunIds'])
          delete stored[k];
        Object.assign(stored, { story: v[':next'], state: v[':queued'] });
        return {};
      }
      // attachRuns: not completed, and no runs yet or only those of an older deploy.
      if (input.UpdateExpression.startsWith('SET runIds')) {
        const older = stored.generation !== undefined && stored.generation < v[':gen'];
        if (stored.state === 'completed' || (stored.runIds !== undefined && !older)) fail();
        if (input.UpdateExpression.includes('REMOVE keptRunIds')) delete stored.keptRunIds;
        Object.assign(stored, { runIds: v[':ids'], generation: v[':gen'] });
        return {};
      }
      if (stored.writer !== v[':token'] || stored.story !== v[':story'] || stored.state === 'completed')
        fail();
      Object.assign(stored, { checkRunId: v[':id'], state: v[':state'], shown: v[':shown'] });
      return { Attributes: structuredClone(stored) };
    });
});

/** GitHub at the port: `listed` holds the head's check runs as GitHub's list would show them. */
function github(listed: { id: number; externalId: string; sha?: string }[] = []) {
  const created: CheckRunWrite[] = [];
  const updated: [number, CheckRunWrite][] = [];
  const lookups: string[] = [];
  const deps: GateDeps = {
    prStatus: {
      createCheckRun: async (w) => {
        created.push(w);
        await new Promise((r) => setTimeout(r, 50));
        return 900 + created.length;
      },
      findCheckRun: async (l) => {
        lookups.push(l.externalId);
        return listed.find((r) => r.externalId === l.externalId && (r.sha ?? SHA) === l.sha)?.id;
      },
      updateCheckRun: async (id, w) => {
        updated.push([id, w]);
      },
    },
  };
  return { deps, created, updated, lookups };
}

describe('bring: one check run per head', () => {
  test('two writers racing on a head with no check run yet: one POST, both see its id', async () => {
    const { deps, created, updated } = github();
    const [a, b] = await Promise.all([
      bring(deps, structuredClone(stored)),
      bring(deps, structuredClone(stored)),
    ]);
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ name: 'Preview tests', sha: SHA, status: 'queued' });
    // The waiting writer found the record showing what it would write: no PATCH either.
    expect(updated).toEqual([]);
    expect([a.checkRunId, b.checkRunId]).toEqual([901, 901]);
    expect(stored.writer).toBeUndefined();
  });

  test('a claim left by a writer that died is taken over once it expires', async () => {
    const { deps, created } = github();
    Object.assign(stored, { writer: 'dead', writerUntil: Date.now() - 1 });
    const record = await bring(deps, structuredClone(stored));
    expect(created).toHaveLength(1);
    expect(record.checkRunId).toBe(901);
  });

  test('a live claim makes a writer wait, then write once it is let go', async () => {
    const { deps, created } = github();
    Object.assign(stored, { writer: 'someone', writerUntil: Date.now() + 60_000 });
    const started = Date.now();
    const pending = bring(deps, structuredClone(stored));
    await new Promise((r) => setTimeout(r, 300));
    expect(created).toEqual([]); // waiting on the live claim, not writing
    delete stored.writer;
    delete stored.writerUntil;
    expect((await pending).checkRunId).toBe(901);
    expect(created).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });
});

describe('bring: a writer that died between GitHub’s create and the record', () => {
  test('the retry finds the story’s check run by its external_id and adopts it: no second one', async () => {
    // GitHub created check run 777 for this story; the writer died before storing its id (its claim expired).
    Object.assign(stored, { writer: 'dead', writerUntil: Date.now() - 1 });
    const { deps, created, updated, lookups } = github([{ id: 777, externalId: externalIdOf(stored) }]);
    const record = await bring(deps, structuredClone(stored));
    expect(created).toEqual([]);
    expect(updated.map(([id, w]) => [id, w.status, w.externalId])).toEqual([
      [777, 'queued', externalIdOf(stored)],
    ]);
    expect(record.checkRunId).toBe(777);
    expect(lookups).toEqual([externalIdOf(stored)]);
    // Recorded now: the next write needs no lookup.
    await bring(deps, structuredClone(stored));
    expect(lookups).toHaveLength(1);
  });

  test('an earlier story’s, another organization’s or another head’s check run is not adopted', async () => {
    stored.story = 2;
    const { deps, created, updated } = github([
      { id: 501, externalId: externalIdOf({ ...stored, story: 1 }) },
      { id: 502, externalId: externalIdOf({ ...stored, orgId: 'org-2' }) },
      { id: 503, externalId: externalIdOf(stored), sha: 'b'.repeat(40) },
    ]);
    const record = await bring(deps, structuredClone(stored));
    expect(updated).toEqual([]);
    expect(created).toHaveLength(1);
    expect(record.checkRunId).toBe(901);
  });

  test('the external_id names whose story it is, and nothing secret', () => {
    const id = externalIdOf(stored);
    expect(id).toMatch(new RegExp(`^[0-9a-f]{12}:acme/web#7@${SHA}/1$`));
    expect(id).not.toContain('org-1');
    expect(externalIdOf({ ...stored, orgId: 'org-2' })).not.toBe(id);
  });
});

describe('bring: the links', () => {
  const failedRun = {
    id: 'run-1',
    testId: 't-1',
    name: 'Checkout',
    status: 'failed',
    startedAt: '2030-01-01T00:00:00.000Z',
    endedAt: '2030-01-01T00:00:04.000Z',
    error: 'expected "Paid"',
    steps: [
      { interaction: 'open /', output: 'ok', status: 'passed', imageKey: 'runs/org-1/run-1/step-1.png' },
      { interaction: 'click Pay', output: 'no', status: 'failed', imageKey: 'runs/org-1/run-1/step-2.png' },
    ],
  };
  const runningRun = { id: 'run-2', testId: 't-2', name: 'Login', status: 'running', steps: [] };
  let signed = 0;
  const links = {
    details: async (r: { envKey: string; sha: string }) =>
      `https://p.example/?env=${r.envKey}&commit=${r.sha}`,
    report: async (id: string) => `https://p.example/report/${id}?sig=${++signed}`,
    screenshot: (reportUrl: string, step: number) => `${reportUrl}#step-${step}`,
  };

  test('details_url, each run its report, the failed step its screenshot; fresh signatures alone write nothing', async () => {
    runs = { 'run-1': failedRun, 'run-2': runningRun };
    stored.runIds = ['run-1', 'run-2'];
    const { deps, created, updated } = github();
    const record = await bring({ ...deps, links }, structuredClone(stored));
    expect(record.state).toBe('in_progress');
    expect(created).toHaveLength(1);
    const [write] = created;
    expect(write!.detailsUrl).toBe(`https://p.example/?env=acme/web#7&commit=${SHA}`);
    expect(write!.output.summary).toContain(
      '| Checkout | `failed` | 4.0 s | 0 | [report](https://p.example/report/run-1?sig=',
    );
    expect(write!.output.summary).toContain('[report](https://p.example/report/run-2?sig=');
    // The failed step's screenshot: the report, at that step (the report page's anchor).
    expect(write!.output.text).toMatch(
      /\[Screenshot\]\(https:\/\/p\.example\/report\/run-1\?sig=\d+#step-2\)/,
    );
    // A second sync mints other signatures, but the story did not move: GitHub is not written again.
    await bring({ ...deps, links }, structuredClone(stored));
    expect(updated).toEqual([]);
  });

  test('no links: the run ids, no details_url, no screenshot; a link that cannot be minted is left out', async () => {
    runs = { 'run-1': failedRun };
    stored.runIds = ['run-1'];
    const { deps, created } = github();
    await bring(deps, structuredClone(stored));
    expect(created[0]!.detailsUrl).toBeUndefined();
    expect(created[0]!.output.summary).toContain('`run-1`');
    expect(created[0]!.output.text).not.toContain('Screenshot');

    stored = { ...stored, checkRunId: undefined, state: 'queued', shown: undefined } as typeof stored;
    const broken = github();
    await bring(
      {
        ...broken.deps,
        links: {
          ...links,
          report: async () => {
            throw new Error('the link key is unreadable');
          },
        },
      },
      structuredClone(stored),
    );
    expect(broken.created[0]!.output.summary).toContain('`run-1`');
    // The screenshot is the report's anchor: no report link, no screenshot link either.
    expect(broken.created[0]!.output.text).not.toContain('Screenshot');
  });
});

describe('attachRuns: a new deploy of the same head', () => {
  const run = (id: string, status: string) => ({
    id,
    testId: `t-${id}`,
    name: `Test ${id}`,
    status,
    steps: [],
  });
  /** The environment as MarkReady passes it: the head, at deploy `generation`. */
  const env = (generation: number) =>
    ({
      orgId: 'org-1',
      envKey: 'acme/web#7',
      repoFullName: 'acme/web',
      prNumber: 7,
      generation,
      status: 'ready',
      inputs: { headSha: SHA },
    }) as unknown as Environment;

  beforeEach(() => {
    runs = { old: run('old', 'running'), kept: run('kept', 'passed'), fresh: run('fresh', 'running') };
  });

  test('a retried MarkReady, or one of an older deploy, changes nothing', async () => {
    Object.assign(stored, { runIds: ['old'], generation: 2, checkRunId: 901, state: 'in_progress' });
    const { deps, created } = github();
    for (const generation of [2, 1]) await attachRuns(deps, env(generation), ['fresh']);
    expect(stored).toMatchObject({ runIds: ['old'], generation: 2, story: 1 });
    expect(created).toEqual([]);
  });

  test('a story still open takes the new runs in place: its check run, the kept results dropped', async () => {
    Object.assign(stored, {
      runIds: ['old'],
      keptRunIds: ['kept'],
      generation: 1,
      checkRunId: 901,
      state: 'in_progress',
    });
    const { deps, created, updated } = github();
    expect(await attachRuns(deps, env(2), ['fresh'])).toBe('in_progress');
    expect(stored).toMatchObject({ runIds: ['fresh'], generation: 2, story: 1, checkRunId: 901 });
    expect(stored.keptRunIds).toBeUndefined();
    expect(created).toEqual([]);
    const [[id, write]] = updated as [[number, CheckRunWrite]];
    expect(id).toBe(901);
    expect(write.output.summary).toContain('Test fresh');
    expect(write.output.summary).not.toMatch(/Test old|Test kept/);
  });

  test('a completed story is final: a fresh story, its own check run, tells the new runs', async () => {
    Object.assign(stored, {
      generation: 1,
      checkRunId: 901,
      state: 'completed',
      conclusion: 'failure',
      end: { kind: 'preview-failed', error: 'app web exited' },
    });
    const { deps, created, updated } = github();
    expect(await attachRuns(deps, env(2), ['fresh'])).toBe('in_progress');
    expect(stored).toMatchObject({ story: 2, runIds: ['fresh'], generation: 2, state: 'in_progress' });
    expect(stored.end).toBeUndefined();
    expect(updated).toEqual([]);
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ status: 'in_progress', externalId: expect.stringMatching(/\/2$/) });
  });
});
