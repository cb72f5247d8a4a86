import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import { keys } from '../../manifest/tables.js';
import type { LinkCheck, MediaReader } from '../../ports/media/port.js';
import { commitPagePath } from './links.js';
import { serveCommitPage } from './page.js';

/*
 * The signed page of a head commit's gate (details_url in AWS): the link is checked before anything is
 * read, the page tells the head's state and runs with fresh report links, and every stored text goes in
 * escaped. DynamoDB at the SDK boundary; the media reader a fake whose link check the test sets.
 */
useAwsSettings();

const SHA = 'c'.repeat(40);
const REF = { orgId: 'org-1', repoFullName: 'acme/web', prNumber: 7, sha: SHA };
const dynamo = mockClient(DynamoDBDocumentClient);
let items: Record<string, Record<string, unknown>>;
let verdict: LinkCheck;
const checked: string[] = [];
const media: MediaReader = {
  url: async (key) => `https://m.example/${key}`,
  signLink: async (path) => `expires=1&sig=${path.length}`,
  checkLink: async (path) => {
    checked.push(path);
    return verdict;
  },
};
const serve = (path = commitPagePath(REF)) =>
  serveCommitPage(media, { path, expires: '1', sig: 's', baseUrl: 'https://api.example/prod' });

beforeEach(() => {
  dynamo.reset();
  checked.length = 0;
  verdict = 'ok';
  items = {
    [keys.gates.checkRun('org-1', 'acme/web#7', SHA)]: {
      pk: keys.gates.checkRun('org-1', 'acme/web#7', SHA),
      orgId: 'org-1',
      envKey: 'acme/web#7',
      repoFullName: 'acme/web',
      prNumber: 7,
      sha: SHA,
      story: 1,
      state: 'completed',
      conclusion: 'neutral',
      end: { kind: 'skipped', by: '<b>mallory</b>', reason: 'docs & "typos"' },
      runIds: ['r1'],
      createdAt: '2030-01-01T00:00:00.000Z',
    },
    'run:r1': {
      runId: 'r1',
      orgId: 'org-1',
      testId: 't1',
      name: '<script>alert(1)</script>',
      status: 'passed',
      createdAt: '2030-01-01T00:00:00.000Z',
      startedAt: '2030-01-01T00:00:01.000Z',
      endedAt: '2030-01-01T00:00:02.000Z',
      folder: { id: 'f', name: 'F' },
      source: 'preview',
      steps: [],
    },
  };
  dynamo.on(GetCommand).callsFake(async (input: { TableName: string; Key: Record<string, string> }) => {
    const key = input.TableName === 't-runs' ? `run:${input.Key.runId}` : String(input.Key.pk);
    return { Item: items[key] ? structuredClone(items[key]) : undefined };
  });
});

describe('serveCommitPage', () => {
  test("the head's state, who skipped and why, each run with a fresh report link; every text escaped", async () => {
    const page = await serve();
    expect(page.status).toBe(200);
    expect(checked).toEqual([`/gate/org-1/acme/web/7/${SHA}`]);
    expect(page.csp).toContain("default-src 'none'");
    expect(page.body).toContain(
      '<span id="title">Skipped by &lt;b&gt;mallory&lt;/b&gt;: docs &amp; &quot;typos&quot;</span>',
    );
    expect(page.body).toContain('Skipped by <strong>&lt;b&gt;mallory&lt;/b&gt;</strong>');
    expect(page.body).toContain('<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>');
    expect(page.body).not.toContain('<script>');
    expect(page.body).toContain('<td>1.0 s</td><td>0</td>');
    expect(page.body).toMatch(
      /<a href="https:\/\/api\.example\/prod\/report\/r1\?expires=1&amp;sig=\d+">report<\/a>/,
    );
  });

  test("a head's later check run is named by its number; the first is not", async () => {
    expect((await serve()).body).not.toContain(' · check run');
    const record = items[keys.gates.checkRun('org-1', 'acme/web#7', SHA)] as { story: number };
    record.story = 2;
    expect((await serve()).body).toContain(`commit <code>${SHA}</code> · check run 2</div>`);
  });

  test.each([
    ['forbidden', 403],
    ['expired', 410],
  ] as const)('a link found %s answers %i, and nothing is read', async (check, status) => {
    verdict = check;
    const page = await serve();
    expect(page.status).toBe(status);
    expect(dynamo.commandCalls(GetCommand)).toHaveLength(0);
  });

  test('a path that is no page is 404 before any check; a head without a check run is 404', async () => {
    for (const path of [
      '/gate/org-1/acme/web/7/xyz',
      `/gate/org-1/acme/web/0/${SHA}`,
      `/gate/org-1/acme/web/7/${SHA}/more`,
      `/gate/../acme/web/7/${SHA}`,
    ])
      expect((await serve(path)).status).toBe(404);
    expect(checked).toEqual([]);
    expect((await serve(commitPagePath({ ...REF, sha: 'd'.repeat(40) }))).status).toBe(404);
  });
});
