import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { appKeyPair, FakeGitHub } from '../../../test/cloud/fakes/github.js';
import { setLogSink } from '../../shared/log.js';
import { GitHubAppPrStatus } from './github-app.js';
import { githubOutboxPath, LocalOutboxPrStatus, OutboxRest } from './local-outbox.js';
import type { CheckRunWrite, PrReport, PrStatus } from './port.js';

/*
 * The PrStatus contract, run against both adapters: the local outbox (for real, in a temp dir), and the
 * GitHub App adapter at its wire boundary: the fake GitHub REST API (App JWT, installations, tokens) with
 * the deployment and comment endpoints it lacks answered by a recorder in front of it, which checks that
 * each call carries an installation token.
 */

setLogSink(() => undefined);
const dir = mkdtempSync(join(tmpdir(), 'preview-prstatus-'));
const APP_ID = '4711';
const SHA = 'c'.repeat(40);
const OTHER_SHA = 'd'.repeat(40);

let github: FakeGitHub;
let front: Server;
let frontUrl = '';
/** The deployment and comment endpoints of the fake, with what they were called with. */
const backend = new OutboxRest(join(dir, 'cloud-backend.jsonl'));
/** Holds comment listings (a test that races two reporters sets it). */
let gate: ((path: string) => Promise<void>) | undefined;
const writes: { method: string; path: string; auth: string }[] = [];

beforeAll(async () => {
  github = await new FakeGitHub().start();
  const keys = appKeyPair();
  github.addApp(APP_ID, keys.publicKey);
  github.addRepo('acme/shop');
  github.addRepo('acme/elsewhere');
  // The check runs' heads (the fake refuses check runs of commits it does not have).
  for (const sha of [SHA, OTHER_SHA]) github.addCommit('acme/shop', {}, undefined, sha);
  github.addInstallation(9, APP_ID, ['acme/shop']);
  front = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const path = req.url ?? '/';
    if (/^\/repos\/[^/]+\/[^/]+\/(deployments|issues)/.test(path)) {
      const auth = req.headers.authorization ?? '';
      writes.push({ method: req.method ?? 'GET', path: path.split('?')[0]!, auth });
      if (!/^token ghs_/.test(auth)) {
        res.writeHead(401, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ message: 'Bad credentials' }));
      }
      if (req.method === 'GET' && /\/issues\/\d+\/comments/.test(path)) await gate?.(path);
      const answer = await backend.request(
        req.method as 'GET' | 'POST' | 'PATCH' | 'DELETE',
        path,
        body.length ? JSON.parse(body.toString()) : undefined,
      );
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(answer.data));
    }
    const upstream = await fetch(`${github.url}${path}`, {
      method: req.method,
      headers: Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k)),
      ) as Record<string, string>,
      body: body.length ? body : undefined,
      redirect: 'manual',
    });
    res.writeHead(upstream.status, {
      'content-type': upstream.headers.get('content-type') ?? 'application/json',
    });
    res.end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((ok) => front.listen(0, '127.0.0.1', () => ok()));
  frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  secret = { appId: APP_ID, privateKey: keys.privateKey, webhookSecret: 'w' };
});
let secret: { appId: string; privateKey: string; webhookSecret: string };
afterAll(async () => {
  await new Promise<void>((done) => {
    front.close(() => done());
    front.closeAllConnections();
  });
  await github.stop();
  rmSync(dir, { recursive: true, force: true });
});

const report = (over: Partial<PrReport> = {}): PrReport => ({
  repoFullName: 'acme/shop',
  prNumber: 7,
  sha: SHA,
  environment: 'preview/pr-7',
  state: 'in_progress',
  description: 'Preview building',
  ownerTag: 'tag1',
  comment: 'deploying',
  version: { generation: 1, at: '2030-01-01T00:00:01.000Z' },
  ...over,
});

const adapters: [string, () => PrStatus][] = [
  ['LocalOutboxPrStatus', () => new LocalOutboxPrStatus(dir)],
  [
    'GitHubAppPrStatus',
    () => new GitHubAppPrStatus({ credentials: { get: async () => secret }, apiUrl: frontUrl }),
  ],
];

describe.each(adapters)('%s', (name, make) => {
  let adapter: PrStatus;
  beforeAll(() => {
    adapter = make();
  });

  test('in progress, then success: one deployment, one comment updated in place', async () => {
    const first = await adapter.publish(report());
    expect(first).toEqual({
      published: true,
      deploymentId: expect.any(Number),
      commentId: expect.any(Number),
    });
    const second = await adapter.publish(
      report({
        state: 'success',
        environmentUrl: 'https://web.preview.example',
        comment: 'ready',
        version: { generation: 1, at: '2030-01-01T00:00:02.000Z' },
      }),
    );
    expect(second).toEqual(first);
  });

  test('a report older than the one shown changes nothing', async () => {
    await expect(
      adapter.publish(
        report({ state: 'failure', version: { generation: 0, at: '2030-01-01T00:00:09.000Z' } }),
      ),
    ).resolves.toEqual({ published: false, reason: 'the pull request already shows a newer status' });
  });

  test('another organization’s environment of the same pull request gets its own deployment and comment', async () => {
    const ours = await adapter.publish(
      report({ version: { generation: 5, at: '2030-01-01T00:00:05.000Z' } }),
    );
    const theirs = await adapter.publish(report({ ownerTag: 'tag2' }));
    expect(theirs.published && ours.published).toBe(true);
    if (theirs.published && ours.published) {
      expect(theirs.deploymentId).not.toBe(ours.deploymentId);
      expect(theirs.commentId).not.toBe(ours.commentId);
    }
  });

  test('the main-branch environment: a deployment, no comment', async () => {
    const out = await adapter.publish(
      report({ prNumber: 0, environment: 'preview/main', comment: undefined }),
    );
    expect(out).toEqual({ published: true, deploymentId: expect.any(Number), commentId: undefined });
  });

  test('a check run is found by its head, name and external_id, and by nothing less', async () => {
    const write = (over: Partial<CheckRunWrite> = {}): CheckRunWrite => ({
      repoFullName: 'acme/shop',
      sha: SHA,
      name: 'Preview tests',
      status: 'queued',
      externalId: `${name}:story-1`,
      output: { title: 'Queued', summary: 'The preview is deploying.' },
      ...over,
    });
    const first = await adapter.createCheckRun(write());
    // A later story on the same head, another check's, and another head's: each its own.
    const second = await adapter.createCheckRun(write({ externalId: `${name}:story-2` }));
    await adapter.createCheckRun(write({ name: 'CI' }));
    await adapter.createCheckRun(write({ sha: OTHER_SHA, externalId: `${name}:other-head` }));
    await adapter.updateCheckRun(first, {
      ...write(),
      status: 'completed',
      conclusion: 'success',
    });
    expect(await adapter.findCheckRun(write())).toBe(first);
    expect(await adapter.findCheckRun(write({ externalId: `${name}:story-2` }))).toBe(second);
    expect(await adapter.findCheckRun(write({ externalId: `${name}:story-3` }))).toBeUndefined();
    expect(await adapter.findCheckRun(write({ sha: OTHER_SHA }))).toBeUndefined();
    expect(await adapter.findCheckRun(write({ name: 'Other' }))).toBeUndefined();
  });

  if (name === 'LocalOutboxPrStatus') {
    test('the outbox lists a commit’s check runs as GitHub does, after a restart too', async () => {
      const rest = new OutboxRest(githubOutboxPath(dir));
      const path = `/repos/acme/shop/commits/${SHA}/check-runs?check_name=${encodeURIComponent('Preview tests')}`;
      const latest = (await rest.request('GET', path)).data as {
        total_count: number;
        check_runs: { external_id: string; status: string; completed_at: string | null }[];
      };
      // filter=latest (the default): the newest of the name.
      expect(latest.check_runs.map((r) => r.external_id)).toEqual([`${name}:story-2`]);
      const all = (await rest.request('GET', `${path}&filter=all`)).data as typeof latest;
      expect(all.total_count).toBe(2);
      const done = all.check_runs.find((r) => r.external_id === `${name}:story-1`)!;
      expect(done.status).toBe('completed');
      expect(done.completed_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      const completed = (await rest.request('GET', `${path}&filter=all&status=completed`))
        .data as typeof latest;
      expect(completed.check_runs.map((r) => r.external_id)).toEqual([`${name}:story-1`]);
    });

    test('every write is a line of the outbox', () => {
      const lines = readFileSync(githubOutboxPath(dir), 'utf8').trim().split('\n');
      const first = JSON.parse(lines[0]!);
      expect(first).toMatchObject({
        method: 'POST',
        path: '/repos/acme/shop/deployments',
        body: {
          ref: SHA,
          environment: 'preview/pr-7',
          transient_environment: true,
          payload: { previewOwner: 'tag1' },
        },
        response: { status: 201, id: expect.any(Number) },
      });
      expect(lines.map((l) => JSON.parse(l).path)).toContain('/repos/acme/shop/issues/7/comments');
    });
  } else {
    test('every call is made with an installation token', () => {
      expect(writes.length).toBeGreaterThan(0);
      expect(writes.filter((w) => !/^token ghs_/.test(w.auth))).toEqual([]);
      expect(github.calls()).toContain('GET /repos/acme/shop/installation');
    });

    test('two reporters racing on a pull request with no comment leave one comment, showing the newer report', async () => {
      // Prepare: both reporters list the comments (and find none) before either creates one, as two
      // functions reporting the same pull request for the first time can.
      const pr = 8;
      let waiting: (() => void)[] = [];
      let first = 2;
      gate = (path) => {
        if (!path.includes(`/issues/${pr}/comments`) || first === 0) return Promise.resolve();
        first--;
        return new Promise<void>((go) => {
          waiting.push(go);
          if (waiting.length === 2) for (const release of waiting.splice(0)) release();
        });
      };
      const other = make();
      const at = (s: number) => ({ generation: 1, at: `2030-01-01T00:00:0${s}.000Z` });
      try {
        // Act
        const [a, b] = await Promise.all([
          adapter.publish(
            report({ prNumber: pr, environment: 'preview/pr-8', comment: 'older', version: at(1) }),
          ),
          other.publish(
            report({ prNumber: pr, environment: 'preview/pr-8', comment: 'newer', version: at(2) }),
          ),
        ]);
        // Assess: each says the same comment, the only one left, and it shows the newer report.
        const left = (await backend.request('GET', `/repos/acme/shop/issues/${pr}/comments?per_page=100`))
          .data as { id: number; body: string }[];
        expect(left).toHaveLength(1);
        expect(left[0]!.body).toMatch(/\nnewer$/);
        expect(a).toMatchObject({ published: true, commentId: left[0]!.id });
        expect(b).toMatchObject({ published: true, commentId: left[0]!.id });
        expect(
          writes.filter((w) => w.method === 'POST' && w.path.endsWith(`/issues/${pr}/comments`)),
        ).toHaveLength(2);
        // Both racers delete the same duplicate (the second DELETE answers 404), never the kept one.
        const deleted = new Set(writes.filter((w) => w.method === 'DELETE').map((w) => w.path));
        expect([...deleted]).toEqual([expect.stringMatching(/\/issues\/comments\/\d+$/)]);
        expect([...deleted][0]).not.toMatch(new RegExp(`/${left[0]!.id}$`));
      } finally {
        gate = undefined;
        waiting = [];
      }
    });

    test('a repository no installation covers: nothing is published, saying why', async () => {
      await expect(adapter.publish(report({ repoFullName: 'acme/elsewhere' }))).resolves.toEqual({
        published: false,
        reason: 'no installation of the GitHub App covers the repository',
      });
    });
  }
});
