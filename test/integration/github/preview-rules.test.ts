import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { accessKey } from '../../../functions/core/applications/access.js';
import {
  createApplication,
  getApplication,
  updateApplication,
} from '../../../functions/core/applications/applications.js';
import { findEnvironment } from '../../../functions/core/environments/lifecycle.js';
import { keys } from '../../../functions/manifest/tables.js';
import { secretStore } from '../../../functions/ports/registry.js';
import { bearer, call } from '../../support/api.js';
import { pollUntil, SERVER_JS, type Status, settled } from '../../support/apps.js';
import { commitFiles, makeRepo, setBranch } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';
import { previewctl } from '../../support/process.js';
import {
  commentSaying,
  deliver,
  lastComment,
  type PrOptions,
  prPayload,
  tick,
} from '../../support/webhooks.js';

/*
 * Which pull requests get a preview, locally: signed GitHub deliveries to the server
 * `npm start` runs, each rule of an application (opt-out label, required label, paths, skipped authors),
 * a label added to an open pull request tearing its preview down with the reason on the PR and removed
 * bringing it back, an event put by hand (`previewctl events put`) judged by the same rules, and the
 * settings through `previewctl apps update` and the listing.
 */

const h = localServerForFile();
let secret: string;

const YAML = `apps:
  web:
    port: 3000
    command: node server.js web
    health: /healthz
`;
const BASE_FILES = {
  'preview.yaml': YAML,
  'server.js': SERVER_JS,
  'web/page.txt': 'v0',
  'docs/guide.md': 'v0',
};
/** Per repository: its base commit and a head changing only `web/`, another changing only `docs/`. */
const shas: Record<string, { base: string; web: string; docs: string }> = {};

function makeRulesRepo(repo: string) {
  const base = makeRepo(h.gitRoot, repo, BASE_FILES);
  const web = commitFiles(h.gitRoot, repo, { 'web/page.txt': 'v1' });
  setBranch(h.gitRoot, repo, 'web-change', web);
  // Back to the base, then a docs-only change beside it.
  execFileSync('git', ['-C', join(h.gitRoot, ...repo.split('/')), 'reset', '--quiet', '--hard', base]);
  const docs = commitFiles(h.gitRoot, repo, { 'docs/guide.md': 'v1' });
  setBranch(h.gitRoot, repo, 'docs-change', docs);
  shas[repo] = { base, web, docs };
}

type Pr = PrOptions & { labels?: string[]; author?: string; label?: string };
/** A pull_request payload with labels, author and (labeled / unlabeled) the label. */
function pr(action: string, o: Pr) {
  const p = prPayload(action, o) as ReturnType<typeof prPayload> & { label?: { name: string } };
  Object.assign(p.pull_request, {
    labels: (o.labels ?? []).map((name) => ({ name })),
    user: { login: o.author ?? 'octocat' },
  });
  if (o.label) p.label = { name: o.label };
  return p;
}
const send = (action: string, o: Pr) => deliver(h, secret, 'pull_request', pr(action, o));

async function settle() {
  await h.service.bus.idle();
  await h.service.workflows.idle();
  await h.service.bus.idle();
}
const envPath = (repo: string, n: number) => `/v1/preview/environments/${repo}/${n}`;
const statusOf = (repo: string, n: number, done: (s: Status) => boolean = settled) =>
  pollUntil(h, h.org, envPath(repo, n), done, 30_000);
const absent = async (repo: string, n: number) =>
  expect((await call(h, 'GET', envPath(repo, n), { headers: bearer(h.org) })).status).toBe(404);

async function appFor(repo: string, settings: Parameters<typeof updateApplication>[2]) {
  makeRulesRepo(repo);
  const { applicationId } = await createApplication({ orgId: h.org.orgId, repoFullName: repo });
  await updateApplication(h.org.orgId, applicationId, settings);
  return applicationId;
}

beforeAll(async () => {
  secret = readFileSync(join(h.dataDir, 'github-webhook-secret'), 'utf8').trim();
}, 60_000);

describe('the opt-out label (default no-preview)', () => {
  const repo = 'acme/opt-out';
  beforeAll(() => appFor(repo, {}));

  test('a pull request opened with it: 202 {"ignored": reason}, no environment', async () => {
    const res = await send('opened', { repo, number: 1, sha: shas[repo]!.web, labels: ['No-Preview'] });
    expect([res.status, res.body]).toEqual([202, { ignored: 'the pull request has the label "no-preview"' }]);
    await settle();
    await absent(repo, 1);
  });

  test('added to an open pull request: its preview is torn down and the PR comment says why; removed: back', async () => {
    const o = { repo, number: 2, sha: shas[repo]!.web, baseSha: shas[repo]!.base };
    expect((await send('opened', o)).body).toMatchObject({ accepted: true, events: 1 });
    expect((await statusOf(repo, 2)).status).toBe('ready');

    // A label that is no rule's changes nothing.
    const bug = await send('labeled', { ...o, labels: ['bug'], label: 'bug' });
    expect(bug.body).toEqual({ ignored: 'label "bug" changes no preview' });

    const added = await send('labeled', { ...o, labels: ['bug', 'no-preview'], label: 'no-preview' });
    expect(added.body).toMatchObject({ accepted: true, events: 1 });
    await settle();
    expect((await statusOf(repo, 2, (s) => s.status === 'torn_down')).status).toBe('torn_down');
    const comment = lastComment(h.dataDir, repo, 2);
    expect(comment).toContain('### Preview environment: torn down');
    expect(comment).toContain('**Why**: the pull request has the label "no-preview"');
    const env = await findEnvironment(h.org.orgId, keys.environments.envKey(repo, 2));
    expect(env?.teardownReason).toBe('the pull request has the label "no-preview"');

    // A push while it carries the label: skipped, nothing left to tear down.
    const push = await send('synchronize', { ...o, labels: ['no-preview'] });
    expect(push.body).toEqual({ ignored: 'the pull request has the label "no-preview"' });

    const removed = await send('unlabeled', { ...o, labels: ['bug'], label: 'no-preview' });
    expect(removed.body).toMatchObject({ accepted: true, events: 1 });
    await settle();
    expect((await statusOf(repo, 2, (s) => s.status === 'ready')).status).toBe('ready');
    expect(lastComment(h.dataDir, repo, 2)).not.toContain('**Why**');
    expect(
      (await findEnvironment(h.org.orgId, keys.environments.envKey(repo, 2)))?.teardownReason,
    ).toBeUndefined();
    // Removing it again (a preview exists): nothing to do.
    const again = await send('unlabeled', { ...o, labels: [], label: 'no-preview' });
    expect(again.body).toEqual({ ignored: 'the pull request has its preview already' });
  }, 90_000);
});

describe('a required label (opt-in)', () => {
  const repo = 'acme/opt-in';
  beforeAll(() => appFor(repo, { requireLabel: 'preview' }));

  test('without it: ignored; labelled: a preview; the label removed: torn down with the reason', async () => {
    const o = { repo, number: 3, sha: shas[repo]!.web, baseSha: shas[repo]!.base };
    const opened = await send('opened', { ...o, labels: ['bug'] });
    expect(opened.body).toEqual({ ignored: 'the pull request lacks the label "preview"' });
    await settle();
    await absent(repo, 3);

    const labelled = await send('labeled', { ...o, labels: ['bug', 'Preview'], label: 'Preview' });
    expect(labelled.body).toMatchObject({ accepted: true, events: 1 });
    expect((await statusOf(repo, 3)).status).toBe('ready');

    const unlabelled = await send('unlabeled', { ...o, labels: ['bug'], label: 'preview' });
    expect(unlabelled.body).toMatchObject({ accepted: true, events: 1 });
    await settle();
    expect((await statusOf(repo, 3, (s) => s.status === 'torn_down')).status).toBe('torn_down');
    expect(lastComment(h.dataDir, repo, 3)).toContain('**Why**: the pull request lacks the label "preview"');
  }, 90_000);
});

describe('paths a pull request must touch (the working copy’s git diff from base to head)', () => {
  const repo = 'acme/paths';
  beforeAll(() => appFor(repo, { paths: ['web/**'] }));

  test('a docs-only change: ignored; a change under web/: a preview', async () => {
    const docs = await send('opened', { repo, number: 4, sha: shas[repo]!.docs, baseSha: shas[repo]!.base });
    expect(docs.body).toEqual({ ignored: 'the pull request changes no file matching web/**' });
    await settle();
    await absent(repo, 4);

    const web = await send('opened', { repo, number: 5, sha: shas[repo]!.web, baseSha: shas[repo]!.base });
    expect(web.body).toMatchObject({ accepted: true, events: 1 });
    expect((await statusOf(repo, 5)).status).toBe('ready');
  }, 60_000);

  test('`previewctl events put` runs the same rules: a hand-put update that touches no web/ file tears the preview down', async () => {
    const file = join(h.dataDir, 'pr-updated.json');
    writeFileSync(
      file,
      JSON.stringify({
        source: 'preview.github',
        'detail-type': 'Pull Request Updated',
        detail: {
          orgId: h.org.orgId,
          repoFullName: repo,
          prNumber: 5,
          headSha: shas[repo]!.docs,
          headRef: 'docs-change',
          baseSha: shas[repo]!.base,
          fork: false,
          eventAt: tick(),
        },
      }),
    );
    const put = await previewctl(h.dataDir, 'events', 'put', '--file', file);
    expect([put.code, put.out.put]).toEqual([0, 1]);
    await pollUntil(h, h.org, envPath(repo, 5), (s) => s.status === 'torn_down', 30_000);
    const why = '**Why**: the pull request changes no file matching web/**';
    expect(await commentSaying(h.dataDir, repo, 5, why)).toContain(why);
  }, 60_000);
});

describe('skipped authors', () => {
  const repo = 'acme/authors';
  beforeAll(() => appFor(repo, { skipAuthors: ['dependabot[bot]'] }));

  test("dependabot's pull request: ignored; another author's: a preview", async () => {
    const o = { repo, sha: shas[repo]!.web, baseSha: shas[repo]!.base };
    const bot = await send('opened', { ...o, number: 6, author: 'Dependabot[bot]' });
    expect(bot.body).toEqual({
      ignored: 'pull request by Dependabot[bot], an author this application skips',
    });
    await settle();
    await absent(repo, 6);
    const person = await send('opened', { ...o, number: 7, author: 'octocat' });
    expect(person.body).toMatchObject({ accepted: true, events: 1 });
    expect((await statusOf(repo, 7)).status).toBe('ready');
  }, 60_000);
});

describe('`previewctl apps update` and the listing', () => {
  const repo = 'acme/settings';
  let applicationId: string;
  beforeAll(async () => {
    applicationId = (await createApplication({ orgId: h.org.orgId, repoFullName: repo })).applicationId;
  });
  const update = (...args: string[]) =>
    previewctl(h.dataDir, 'apps', 'update', '--org', h.org.orgId, '--app', applicationId, ...args);

  test('the rules are set, shown with their defaults, listed; bad input is a usage error that changes nothing', async () => {
    const listed = async () =>
      (await call(h, 'GET', `/v1/preview/applications?repo=${repo}`, { headers: bearer(h.org) })).body
        .applications[0];
    expect(await listed()).toMatchObject({
      skipLabel: 'no-preview',
      requireLabel: null,
      paths: [],
      skipAuthors: [],
    });
    const ok = await update(
      '--skip-label',
      'skip-preview',
      '--require-label',
      'preview',
      '--paths',
      'web/,api/**',
      '--skip-authors',
      'dependabot[bot],renovate[bot]',
    );
    const rules = {
      skipLabel: 'skip-preview',
      requireLabel: 'preview',
      paths: ['api/**', 'web/**'],
      skipAuthors: ['dependabot[bot]', 'renovate[bot]'],
    };
    expect([ok.code, ok.out]).toEqual([0, expect.objectContaining(rules)]);
    expect(await listed()).toMatchObject(rules);

    for (const [args, message] of [
      [['--paths', '/etc/**'], '--paths: "/etc/**" must be relative to the repository root (no leading /)'],
      [['--paths', 'web/**,../up'], '--paths: "../up" must not hold . or .. segments'],
      [['--skip-authors', 'not a login'], '--skip-authors: "not a login" is not a GitHub login'],
      [['--skip-label', 'x'.repeat(51)], '--skip-label: a label name of at most 50 characters ("" for none)'],
    ] as const) {
      const res = await update(...args);
      expect([res.code, res.out.error]).toEqual([2, message]);
    }
    expect(await getApplication(h.org.orgId, applicationId)).toMatchObject(rules);

    // "" turns a rule off and empties a list.
    const off = await update('--skip-label', '', '--require-label', '', '--paths', '', '--skip-authors', '');
    expect(off.out).toMatchObject({ skipLabel: null, requireLabel: null, paths: [], skipAuthors: [] });
  }, 60_000);
});

describe('PATCH /v1/preview/applications/{applicationId}', () => {
  const repo = 'acme/settings-api';
  let applicationId: string;
  beforeAll(async () => {
    applicationId = (await createApplication({ orgId: h.org.orgId, repoFullName: repo })).applicationId;
  });
  const patch = (body: unknown, org = h.org, id = applicationId) =>
    call(h, 'PATCH', `/v1/preview/applications/${id}`, { body, headers: bearer(org) });

  test('sets the rules and answers the application as listed; bad input is a 400 naming the field, nothing stored', async () => {
    const ok = await patch({
      requireLabel: 'preview',
      paths: ['web/', 'api/**'],
      skipAuthors: ['dependabot[bot]'],
    });
    const rules = {
      skipLabel: 'no-preview',
      requireLabel: 'preview',
      paths: ['api/**', 'web/**'],
      skipAuthors: ['dependabot[bot]'],
    };
    expect([ok.status, ok.body]).toEqual([
      200,
      expect.objectContaining({ applicationId, repoFullName: repo, ...rules }),
    ]);
    const before = await getApplication(h.org.orgId, applicationId);

    for (const [body, error] of [
      [{}, 'give at least one of skipLabel, requireLabel, paths, skipAuthors, access, sleepAfterMinutes'],
      [{ access: 'private' }, 'access must be one of protected, public'],
      [{ sleepAfterMinutes: -1 }, 'sleepAfterMinutes must be a number of minutes from 0 (never)'],
      [{ sleepAfterMinutes: 1e9 }, 'sleepAfterMinutes must be a number of minutes'],
      [{ sleepAfterMinutes: '5' }, 'sleepAfterMinutes'],
      [{ access: 'public', sleepAfterMinutes: -2 }, 'sleepAfterMinutes'],
      [{ paths: ['/abs/**'] }, 'paths: "/abs/**" must be relative to the repository root (no leading /)'],
      [{ skipAuthors: ['two words'] }, 'skipAuthors: "two words" is not a GitHub login'],
      [{ skipLabel: 7 }, 'skipLabel'],
      [{ paths: 'web/**' }, 'paths'],
      [{ bogus: true }, 'bogus'],
    ] as const) {
      const res = await patch(body);
      expect([res.status, typeof res.body.error]).toEqual([400, 'string']);
      expect(res.body.error).toContain(error);
    }
    expect(await getApplication(h.org.orgId, applicationId)).toEqual(before);

    // Another organization's application: 404, unchanged.
    const other = await h.newOrg('rules-other');
    const foreign = await patch({ skipLabel: '' }, other);
    expect([foreign.status, foreign.body]).toEqual([404, { error: 'application not found' }]);
    const missing = await patch({ skipLabel: '' }, h.org, 'no-such-application');
    expect([missing.status, missing.body]).toEqual([404, { error: 'application not found' }]);
    expect(await getApplication(h.org.orgId, applicationId)).toEqual(before);
  });

  test('sets the front door: access and sleepAfterMinutes, listed; protecting makes the access key, never answered', async () => {
    const key = () => accessKey(secretStore(), applicationId);
    expect(await key()).toBeUndefined();
    const ok = await patch({ access: 'protected', sleepAfterMinutes: 0.5 });
    expect([ok.status, ok.body]).toEqual([
      200,
      expect.objectContaining({ applicationId, access: 'protected', sleepAfterMinutes: 0.5 }),
    ]);
    const made = await key();
    expect(made).toMatch(/.{16,}/);
    expect(JSON.stringify(ok.body)).not.toContain(made!);
    const listed = await call(h, 'GET', `/v1/preview/applications?repo=${repo}`, { headers: bearer(h.org) });
    expect(listed.body.applications[0]).toMatchObject({ access: 'protected', sleepAfterMinutes: 0.5 });
    // Back to public and never asleep: the key stays (a later protect keeps its links' key).
    const back = await patch({ access: 'public', sleepAfterMinutes: 0 });
    expect(back.body).toMatchObject({ access: 'public', sleepAfterMinutes: 0 });
    expect(await key()).toBe(made);
  });
});
