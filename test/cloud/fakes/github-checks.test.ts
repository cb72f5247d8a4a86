import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { FakeGitHub } from './github.js';
import { type InstallationOctokit, installedFake } from './github-installed.js';

/*
 * The check-runs routes of the GitHub fake, called as the service calls them (an installation token of
 * the App, through @octokit): what GitHub takes, and the 422s it answers, nothing stored for those.
 */

const APP_ID = '777';
let github: FakeGitHub;
let sha: string;
let octokit: InstallationOctokit;

beforeAll(async () => {
  ({ github, octokit } = await installedFake(APP_ID, 3));
  sha = github.addCommit('acme/shop', { 'a.txt': 'a' }, 'main');
});
afterAll(() => github.stop());

/** A call, GitHub's answer (an HTTP error is an answer here). */
async function call(method: 'POST' | 'PATCH', path: string, body: Record<string, unknown>) {
  try {
    const res = await octokit.request(`${method} ${path}`, body);
    return { status: res.status, data: res.data as Record<string, unknown> };
  } catch (err) {
    const e = err as { status: number; response?: { data: Record<string, unknown> } };
    return { status: e.status, data: e.response?.data ?? {} };
  }
}

const create = (body: Record<string, unknown>) => call('POST', '/repos/acme/shop/check-runs', body);
const output = { title: 'Queued', summary: 'Waiting for the preview' };

describe('POST and PATCH of check runs', () => {
  test('created queued, completed with a conclusion; the story kept, times at whole seconds', async () => {
    const created = await create({ name: 'Preview tests', head_sha: sha, status: 'queued', output });
    expect(created.status).toBe(201);
    expect(created.data).toMatchObject({
      name: 'Preview tests',
      head_sha: sha,
      status: 'queued',
      conclusion: null,
      completed_at: null,
    });
    expect(created.data.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const id = created.data.id as number;
    const done = await call('PATCH', `/repos/acme/shop/check-runs/${id}`, {
      status: 'completed',
      conclusion: 'success',
      completed_at: '2031-01-02T03:04:05.678Z',
      output: { title: '1 test passed', summary: '| t | `passed` |' },
    });
    expect(done.status).toBe(200);
    expect(done.data).toMatchObject({ id, status: 'completed', conclusion: 'success' });
    expect(done.data.completed_at).toBe('2031-01-02T03:04:05Z');
    expect(github.checkRuns.storyOf(id).map((w) => [w.method, w.body.status])).toEqual([
      ['POST', 'queued'],
      ['PATCH', 'completed'],
    ]);
    expect(github.checkRuns.ofHead(sha)).toHaveLength(1);
  });

  test.each([
    ['no name', { head_sha: 'HEAD', status: 'queued' }, /"name" wasn't supplied/],
    ['no head_sha', { name: 'Preview tests' }, /"head_sha" wasn't supplied/],
    ['an unknown commit', { name: 'Preview tests', head_sha: 'f'.repeat(40) }, /No commit found/],
    ['completed without a conclusion', { name: 'P', head_sha: 'HEAD', status: 'completed' }, /conclusion/],
    [
      'a conclusion while in progress',
      { name: 'P', head_sha: 'HEAD', status: 'in_progress', conclusion: 'success' },
      /only allowed when "status" is "completed"/,
    ],
    ['an unknown status', { name: 'P', head_sha: 'HEAD', status: 'done' }, /not a member/],
    ['an unknown conclusion', { name: 'P', head_sha: 'HEAD', conclusion: 'passed' }, /not a valid/],
    ['an output without a summary', { name: 'P', head_sha: 'HEAD', output: { title: 't' } }, /summary/],
    [
      'an action label over 20 characters',
      {
        name: 'P',
        head_sha: 'HEAD',
        actions: [{ label: 'Re-run every failed test now', description: 'd', identifier: 'x' }],
      },
      /label/,
    ],
  ] as [string, Record<string, unknown>, RegExp][])(
    '%s: 422, nothing stored',
    async (_what, body, message) => {
      const before = github.checkRuns.writes.length;
      const sent = { ...body, ...(body.head_sha === 'HEAD' ? { head_sha: sha } : {}) };
      const res = await create(sent);
      expect(res.status).toBe(422);
      expect(String(res.data.message)).toMatch(message);
      expect(github.checkRuns.writes).toHaveLength(before);
    },
  );

  test('a conclusion without a status completes the run, as GitHub documents', async () => {
    const res = await create({ name: 'P', head_sha: sha, conclusion: 'neutral', output });
    expect(res.status).toBe(201);
    expect(res.data).toMatchObject({ status: 'completed', conclusion: 'neutral' });
    expect(res.data.completed_at).toMatch(/:\d\dZ$/);
  });

  test('a PATCH of an unknown id, or of another repository’s check run: 404', async () => {
    const id = (await create({ name: 'P', head_sha: sha })).data.id as number;
    expect((await call('PATCH', '/repos/acme/shop/check-runs/1', { status: 'in_progress' })).status).toBe(
      404,
    );
    // acme/other, covered by the same installation, has no check run of that id.
    const other = await call('PATCH', `/repos/acme/other/check-runs/${id}`, { status: 'in_progress' });
    expect(other.status).toBe(404);
    expect(github.checkRuns.storyOf(id)).toHaveLength(1);
  });

  test('without an installation token: 401', async () => {
    const res = await fetch(`${github.url}/repos/acme/shop/check-runs`, {
      method: 'POST',
      body: JSON.stringify({ name: 'P', head_sha: sha }),
    });
    expect(res.status).toBe(401);
  });
});
