import { describe, expect, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { startPreviewRuns } from '../../../functions/core/runs/lifecycle.js';
import { importTests } from '../../../functions/core/test-definitions/definitions.js';
import { workflows } from '../../../functions/ports/registry.js';
import { ValidationError } from '../../../functions/shared/errors.js';
import { bearer, call, client, linkRepo } from '../../support/api.js';
import { pollUntil } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { RUNS_APP_JS, RUNS_APP_YAML, runEnded, signUpSteps } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';

/*
 * What a run runs against, and what happens when it is not there; runs started by previews; tenancy of tests
 * and runs.
 */

const h = localServerForFile();
const app = runsAppForFile(h, { repo: 'acme/target' });

const startRun = (testId: string, body?: unknown, org = h.org) =>
  call(h, 'POST', `/test/${testId}/run`, { headers: client(org), body });
const runOf = async (testId: string, body?: unknown) => {
  const res = await startRun(testId, body);
  expect(res.status).toBe(201);
  return runEnded(h, res.body.run_id);
};

describe('environmentId', () => {
  test('is a CUID in PreviewStatus, and the main-branch environment is the default target', async () => {
    expect(app.main.environmentId).toMatch(/^[a-z0-9]{20,}$/);
    const run = await runOf(await app.importTest({}));
    expect(run.status).toBe('passed');
    // The wait for the preview before the first step is on the record (an awake app answers at once).
    expect(run.metadata).toEqual({
      source: 'api',
      attempts: 1,
      wake: { waited_ms: expect.any(Number), apps: { web: expect.any(Number) } },
    });
  }, 60_000);

  test('a PR environment: the 202 body names it, and application_version_id runs against it', async () => {
    const sha = commitFiles(h.gitRoot, app.repo, {
      'server.js': RUNS_APP_JS.replace('Sign up</h1>', 'Sign up (PR 5)</h1>'),
    });
    const res = await call(h, 'POST', '/v1/preview/environments', {
      headers: bearer(h.org),
      body: { repoFullName: app.repo, prNumber: 5, headSha: sha, headRef: 'pr-5' },
    });
    expect(res.status).toBe(202);
    expect(res.body.environmentId).toMatch(/^[a-z0-9]{20,}$/);
    expect(res.body.environmentId).not.toBe(app.main.environmentId);
    const pr = await pollUntil(
      h,
      h.org,
      `/v1/preview/environments/${app.repo}/5`,
      (s) => s.status === 'ready',
      60_000,
    );
    expect((pr as any).environmentId).toBe(res.body.environmentId);

    const testId = await app.importTest({
      name: 'PR heading',
      step_timeout_seconds: 2,
      steps: [{ interaction: 'assert-text', instruction: 'It says "Sign up (PR 5)"' }],
    });
    const onPr = await runOf(testId, { application_version_id: res.body.environmentId });
    expect(onPr.status).toBe('passed');
    expect(onPr.metadata).toEqual({
      source: 'api',
      application_version_id: res.body.environmentId,
      attempts: 1,
      wake: { waited_ms: expect.any(Number), apps: { web: expect.any(Number) } },
    });
    const onMain = await runOf(testId);
    expect(onMain.status).toBe('failed');
    expect(onMain.error).toBe(
      'step 1 (assert-text) failed: text "Sign up (PR 5)" not found in the page within 2 s',
    );
  }, 120_000);
});

describe('a target that is not there: the run is created (201) and ends failed saying which', () => {
  test.each([
    [
      'the test has no application',
      { application_id: undefined },
      undefined,
      'the test has no application: set application_id in the tests file, or import it with `previewctl tests import --app ID`',
    ],
    [
      'no such environment',
      {},
      { application_version_id: 'nosuchenvironment' },
      'no environment nosuchenvironment of application APP',
    ],
    [
      'no such app in the environment',
      { application_version: { name: 'admin', path: '/' } },
      undefined,
      'the main-branch environment (0) of application APP has no app "admin" (its apps: api, web)',
    ],
  ])('%s', async (_label, over, body, error) => {
    const testId = await app.importTest(over);
    const res = await startRun(testId, body);
    expect(res.status).toBe(201);
    const run = await runEnded(h, res.body.run_id, 20_000);
    expect(run.status).toBe('failed');
    expect(run.error).toBe(error.replace('APP', app.applicationId));
    expect(run.steps.map((s: any) => s.status)).toEqual(signUpSteps.map(() => 'skipped'));
    expect(run.video_url).toBeNull();
  });

  test('an application without a main-branch environment, or not linked to a repository', async () => {
    const undeployed = await linkRepo(h.org, 'acme/undeployed');
    const unlinked = (await createApplication({ orgId: h.org.orgId })).applicationId;
    const a = await runOf(await app.importTest({ application_id: undeployed }));
    const b = await runOf(await app.importTest({ application_id: unlinked }));
    expect(a.error).toBe(
      `application ${undeployed} has no main-branch environment (0): deploy it, or name an environment with application_version_id`,
    );
    expect(b.error).toBe(`application ${unlinked} is not linked to a repository, so it has no environments`);
  });

  test('an environment that is not ready', async () => {
    makeRepo(h.gitRoot, 'acme/slow', {
      'preview.yaml': RUNS_APP_YAML.replace(
        'command: node server.js\n',
        'build: sleep 30\n    command: node server.js\n',
      ),
      'server.js': RUNS_APP_JS,
    });
    const slow = await linkRepo(h.org, 'acme/slow');
    const deploy = await call(h, 'POST', `/v1/preview/applications/${slow}/0`, {
      headers: bearer(h.org),
    });
    expect(deploy.status).toBe(202);
    await pollUntil(h, h.org, '/v1/preview/environments/acme/slow/0', (s) => s.status === 'building', 30_000);
    const run = await runOf(await app.importTest({ application_id: slow }));
    expect(run.error).toBe(
      `the main-branch environment (0) of application ${slow} is not ready (status building)`,
    );
    await call(h, 'DELETE', '/v1/preview/environments/acme/slow/0', { headers: bearer(h.org) });
  }, 60_000);

  test('no run is left pending or running', async () => {
    for (const status of ['pending', 'running']) {
      const res = await call(h, 'GET', `/run?status=${status}`, { headers: client(h.org) });
      expect([status, res.body]).toEqual([status, []]);
    }
  });
});

describe('application_id in the tests file and previewctl tests import --app', () => {
  test('an application_id of no application of the organization is refused, nothing stored', async () => {
    const other = await h.newOrg('other-importer');
    const theirs = (await createApplication({ orgId: other.orgId, repoFullName: 'other/repo' }))
      .applicationId;
    const file = [
      {
        name: 't',
        folder: { id: 'f', name: 'F' },
        application_version: { name: 'web', path: '/' },
        steps: [],
      },
    ];
    await expect(importTests(h.org.orgId, [{ ...file[0], application_id: theirs }])).rejects.toThrow(
      new ValidationError(
        `invalid tests file: [0].application_id: no application ${theirs} in this organization`,
      ),
    );
    await expect(importTests(h.org.orgId, file, { applicationId: theirs })).rejects.toThrow(
      new ValidationError(`--app: no application ${theirs} in this organization`),
    );
  });

  test('--app sets the application of every test; the test shows it', async () => {
    const file = [
      {
        name: 'a',
        folder: { id: 'f', name: 'F' },
        application_version: { name: 'web', path: '/' },
        steps: signUpSteps,
      },
      {
        name: 'b',
        folder: { id: 'f', name: 'F' },
        application_version: { name: 'web', path: '/' },
        steps: [],
        application_id: 'ignored',
      },
    ];
    const out = await importTests(h.org.orgId, file, { applicationId: app.applicationId });
    for (const { id } of out.tests) {
      const res = await call(h, 'GET', `/test/${id}`, { headers: client(h.org) });
      expect(res.body.application_id).toBe(app.applicationId);
    }
  });
});

describe('run_on_preview', () => {
  test('an environment of the application becoming ready starts its run_on_preview tests (source preview)', async () => {
    const onPreview = await app.importTest({ name: 'On every preview', run_on_preview: true });
    await app.importTest({ name: 'Not on previews' });
    const pr = await call(h, 'GET', `/v1/preview/environments/${app.repo}/0`, { headers: bearer(h.org) });
    // What mark-ready does once an environment is ready.
    const runIds = await startPreviewRuns(
      { workflows: workflows() },
      { orgId: h.org.orgId, repoFullName: app.repo, prNumber: 0, environmentId: pr.body.environmentId },
    );
    expect(runIds).toHaveLength(1);
    const run = await runEnded(h, runIds[0]!);
    expect(run).toMatchObject({
      test_id: onPreview,
      status: 'passed',
      metadata: { source: 'preview', application_version_id: pr.body.environmentId },
    });
  }, 60_000);
});

describe('tenancy', () => {
  test("another organization's tests, runs and run media are 404 to it", async () => {
    const testId = await app.importTest({});
    const started = (await startRun(testId)).body;
    const run = await runEnded(h, started.run_id);
    const other = await h.newOrg('intruder');
    const as = client(other);
    expect((await call(h, 'GET', `/test/${testId}`, { headers: as })).status).toBe(404);
    expect((await startRun(testId, {}, other)).status).toBe(404);
    expect((await call(h, 'GET', `/run/${run.id}?media=true&steps=true`, { headers: as })).status).toBe(404);
    expect((await call(h, 'GET', `/run?status=${run.status}`, { headers: as })).body).toEqual([]);
    // A report link signed for one run opens no other.
    const sig = new URL(started.url).search;
    const otherRun = (await startRun(await app.importTest({}))).body.run_id;
    expect((await fetch(`${h.url}/report/${otherRun}${sig}`)).status).toBe(403);
  }, 60_000);
});
