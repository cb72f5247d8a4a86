import { expect, test } from '@jest/globals';
import type { Environment } from '../environments/types.js';
import { environmentLine, runEnvironmentOf } from './environment.js';
import { renderRunReport } from './report.js';
import type { RunItem } from './store.js';
import { toTestRunView } from './views.js';

/* A run and its report name the environment it ran against (repo, PR, commit). */

const SHA = '1a2b3c4d5e6f708192a3b4c5d6e7f80912a3b4c5';
const env = (over: Partial<Environment> = {}): Environment => ({
  orgId: 'o',
  envKey: 'acme/shop#7',
  repoFullName: 'acme/shop',
  prNumber: 7,
  status: 'ready',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  urls: { web: 'http://127.0.0.1:1/' },
  generation: 1,
  lastDeployedSha: SHA,
  inputs: { headSha: 'b'.repeat(40), headRef: 'f' },
  ...over,
});

const run: RunItem = {
  runId: 'r1',
  orgId: 'o',
  testId: 't',
  name: 'Checkout',
  status: 'passed',
  createdAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:02.000Z',
  folder: { id: 'f', name: 'F' },
  source: 'api',
  variables: {},
  steps: [],
  createdKey: 'k',
  testKey: 'k',
  folderKey: 'k',
  statusKey: 'k',
};
const withTarget = (e: Environment): RunItem => ({
  ...run,
  target: {
    url: 'http://127.0.0.1:1/',
    appUrl: 'http://127.0.0.1:1/',
    applicationId: 'a',
    apps: ['web'],
    environment: runEnvironmentOf(e),
  },
});

test('the environment of a run is the deployed commit, else the head being deployed', () => {
  expect(runEnvironmentOf(env())).toEqual({ repoFullName: 'acme/shop', prNumber: 7, sha: SHA });
  expect(runEnvironmentOf(env({ lastDeployedSha: undefined }))).toEqual({
    repoFullName: 'acme/shop',
    prNumber: 7,
    sha: 'b'.repeat(40),
  });
  expect(runEnvironmentOf(env({ lastDeployedSha: undefined, inputs: undefined }))).toEqual({
    repoFullName: 'acme/shop',
    prNumber: 7,
  });
});

test('the TestRun names it once the target was resolved, and not before', () => {
  expect(toTestRunView(withTarget(env()), { media: false, steps: false }).environment).toEqual({
    repository: 'acme/shop',
    pr_number: 7,
    commit: SHA,
  });
  expect(
    toTestRunView(withTarget(env({ lastDeployedSha: undefined, inputs: undefined })), {
      media: false,
      steps: false,
    }).environment,
  ).toEqual({ repository: 'acme/shop', pr_number: 7, commit: null });
  expect('environment' in toTestRunView(run, { media: false, steps: false })).toBe(false);
});

test("the report's header names repo, PR and commit (the main branch for PR 0), escaped", () => {
  expect(environmentLine(runEnvironmentOf(env()))).toBe('acme/shop · PR #7 · commit 1a2b3c4');
  expect(environmentLine(runEnvironmentOf(env({ prNumber: 0 })))).toBe(
    'acme/shop · main branch · commit 1a2b3c4',
  );
  const html = renderRunReport(withTarget(env({ repoFullName: 'acme/<b>' })), new Map());
  expect(html).toContain('<div class="env" id="environment">acme/&lt;b&gt; · PR #7 · commit 1a2b3c4</div>');
  expect(renderRunReport(run, new Map())).not.toContain('id="environment"');
});
