import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { FakeGitHub } from './github.js';
import { type InstallationOctokit, installedFake } from './github-installed.js';

/*
 * The issue-comment routes of the GitHub fake, called as the service calls them (an installation token
 * of the App, through @octokit): a pull request's comments listed, created, updated, deleted; the 404s
 * and 422s GitHub answers, nothing stored for those.
 */

const APP_ID = '778';
let github: FakeGitHub;
let octokit: InstallationOctokit;

beforeAll(async () => {
  ({ github, octokit } = await installedFake(APP_ID, 4));
  const sha = github.addCommit('acme/shop', { 'a.txt': 'a' }, 'main');
  github.setPull('acme/shop', 5, { headSha: sha, headRef: 'feature-5' });
});
afterAll(() => github.stop());

const status = (p: Promise<unknown>) => p.then(() => 200).catch((e: { status?: number }) => e.status);

describe('the comments of a pull request', () => {
  test('created, listed oldest first and paged, updated, deleted: each write recorded', async () => {
    const base = { owner: 'acme', repo: 'shop', issue_number: 5 };
    const a = await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
      ...base,
      body: 'first',
    });
    expect(a.status).toBe(201);
    expect(a.data).toMatchObject({ body: 'first', user: { login: 'preview-app[bot]', type: 'Bot' } });
    await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
      ...base,
      body: 'second',
    });
    const listed = await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', base);
    expect(listed.data.map((c: { body?: string }) => c.body)).toEqual(['first', 'second']);
    const page2 = await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', {
      ...base,
      per_page: 1,
      page: 2,
    });
    expect(page2.data.map((c: { body?: string }) => c.body)).toEqual(['second']);

    const id = a.data.id;
    const edited = await octokit.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', {
      owner: 'acme',
      repo: 'shop',
      comment_id: id,
      body: 'edited',
    });
    expect(edited.data.body).toBe('edited');
    const gone = await octokit.request('DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}', {
      owner: 'acme',
      repo: 'shop',
      comment_id: id,
    });
    expect(gone.status).toBe(204);
    expect(github.issueComments.on('acme/shop', 5).map((c) => c.body)).toEqual(['second']);
    expect(github.issueComments.writes.map((w) => w.method)).toEqual(['POST', 'POST', 'PATCH', 'DELETE']);
  });

  test('an unknown pull request, another repository’s comment, an empty body: refused, nothing stored', async () => {
    const before = github.issueComments.writes.length;
    const post = (issue_number: number, body: string) =>
      status(
        octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
          owner: 'acme',
          repo: 'shop',
          issue_number,
          body,
        }),
      );
    expect(await post(6, 'no such pull request')).toBe(404);
    expect(await post(5, '')).toBe(422);
    expect(await post(5, 'x'.repeat(65_537))).toBe(422);
    const [kept] = github.issueComments.on('acme/shop', 5);
    expect(
      await status(
        octokit.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', {
          owner: 'acme',
          repo: 'other',
          comment_id: kept!.id,
          body: 'not yours',
        }),
      ),
    ).toBe(404);
    expect(github.issueComments.writes).toHaveLength(before);
    expect(github.issueComments.on('acme/shop', 5).map((c) => c.body)).toEqual(['second']);
  });
});
