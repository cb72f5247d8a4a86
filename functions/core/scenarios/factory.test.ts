import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FACTORY_JS } from '../../../test/support/factory-app.js';
import { testRunShortId } from '../recipes/versions.js';
import {
  callFactory,
  FactoryError,
  factoryUrl,
  parseUpAnswer,
  signBody,
  substituteTokens,
} from './factory.js';
import { scenarioMetadata } from './state.js';

const tokens = { testRunId: 'run-abc', testRunShortId: 'deadbeef' };

describe('substituteTokens', () => {
  test('replaces both tokens in every string, nested in objects and arrays and inside longer strings', () => {
    const create = {
      users: [
        {
          _alias: 'u1',
          email: 'qa+{{testRunShortId}}@example.com',
          tags: ['{{testRunId}}', ['deep-{{testRunShortId}}-{{testRunId}}', { x: 'a{{testRunId}}b' }]],
          age: 3,
          active: true,
          none: null,
        },
      ],
      orders: [{ user: { _ref: 'u1' }, note: 'for {{testRunId}} / {{testRunShortId}}{{testRunShortId}}' }],
    };
    expect(substituteTokens(create, tokens)).toEqual({
      users: [
        {
          _alias: 'u1',
          email: 'qa+deadbeef@example.com',
          tags: ['run-abc', ['deep-deadbeef-run-abc', { x: 'arun-abcb' }]],
          age: 3,
          active: true,
          none: null,
        },
      ],
      orders: [{ user: { _ref: 'u1' }, note: 'for run-abc / deadbeefdeadbeef' }],
    });
    // The input is untouched.
    expect(create.users[0]!.email).toBe('qa+{{testRunShortId}}@example.com');
  });

  test('testRunShortId is the first 8 hex characters of SHA-256 of the testRunId', () => {
    expect(testRunShortId('run-abc')).toBe(createHash('sha256').update('run-abc').digest('hex').slice(0, 8));
    expect(testRunShortId('a')).not.toBe(testRunShortId('b'));
  });
});

describe('factoryUrl and answers', () => {
  test('the app URL in the environment plus the path; an unknown app says so', () => {
    expect(factoryUrl({ api: 'http://127.0.0.1:5000/' }, { app: 'api', path: '/_preview/factory' })).toBe(
      'http://127.0.0.1:5000/_preview/factory',
    );
    expect(factoryUrl({ web: 'http://x' }, { app: 'api', path: '/f' })).toEqual({
      error: expect.stringContaining('"api" is not an app of the run\'s environment (its apps: web)'),
    });
  });
  test('parseUpAnswer keeps headers, cookies and refs', () => {
    expect(
      parseUpAnswer({
        auth: { headers: { a: 1 }, cookies: [{ name: 's', value: 'v', path: '/' }, { bad: 1 }] },
        refs: [1],
      }),
    ).toEqual({ auth: { headers: { a: '1' }, cookies: [{ name: 's', value: 'v', path: '/' }] }, refs: [1] });
    expect(parseUpAnswer({})).toEqual({});
  });
  test('metadata of a run', () => {
    expect(
      scenarioMetadata({
        setupId: 's',
        name: 'r',
        version: 2,
        testRunId: 't',
        testRunShortId: 'abcd1234',
        status: 'down_failed',
        upMs: 10,
        downMs: 5,
        downError: 'boom',
      }),
    ).toEqual({
      scenario: { setup_id: 's', recipe: 'r', version: 2, status: 'down_failed' },
      test_run_id: 't',
      test_run_short_id: 'abcd1234',
      scenario_up_ms: 10,
      scenario_down_ms: 5,
      scenario_down_error: 'boom',
    });
  });
});

describe('callFactory', () => {
  let server: Server;
  let url: string;
  const seen: { signature: string | undefined; body: string }[] = [];
  let answers: [number, string][] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        seen.push({ signature: req.headers['x-signature'] as string | undefined, body });
        const [status, text] = answers.shift() ?? [200, '{}'];
        if (status === 0) return; // never answers
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(text);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/f`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const identity = (t: string) => t;

  test('signs the raw body: x-signature is the hex HMAC-SHA256 with the secret', async () => {
    seen.length = 0;
    answers = [[200, '{"refs":{"id":1}}']];
    expect(await callFactory(url, 'k'.repeat(64), { action: 'up', n: 1 }, identity)).toEqual({
      refs: { id: 1 },
    });
    expect(seen[0]!.signature).toBe(signBody('k'.repeat(64), seen[0]!.body));
    expect(seen[0]!.body).toBe('{"action":"up","n":1}');
  });

  test('503 twice then 200 succeeds', async () => {
    seen.length = 0;
    answers = [
      [503, 'busy'],
      [503, 'busy'],
      [200, '{"auth":{}}'],
    ];
    expect(await callFactory(url, 's', { action: 'up' }, identity, { backoffMs: 10 })).toEqual({ auth: {} });
    expect(seen).toHaveLength(3);
  });

  test('a 400 fails at once with the answer, truncated and masked', async () => {
    seen.length = 0;
    const secret = 'super-secret-value';
    answers = [[400, JSON.stringify({ error: `bad ${secret}`, pad: 'x'.repeat(2000) })]];
    const err: any = await callFactory(url, secret, { action: 'up' }, (t) =>
      t.split(secret).join('[secret]'),
    ).catch((e) => e);
    expect(err).toBeInstanceOf(FactoryError);
    expect(err.message).toContain('refused up');
    expect(err.message).toContain('400 {"error":"bad [secret]"');
    expect(err.message).not.toContain(secret);
    expect(err.message.length).toBeLessThan(700);
    expect(seen).toHaveLength(1);
  });

  test('503 past the retry budget fails, quoting the last answer', async () => {
    answers = Array.from({ length: 20 }, () => [503, 'still busy'] as [number, string]);
    await expect(
      callFactory(url, 's', { action: 'down' }, identity, { backoffMs: 20, retryMs: 100 }),
    ).rejects.toThrow(/kept failing down .*503 still busy/);
    answers = [];
  });

  test('no answer within the timeout fails the call', async () => {
    answers = [[0, '']];
    await expect(callFactory(url, 's', { action: 'up' }, identity, { timeoutMs: 200 })).rejects.toThrow(
      'did not answer up',
    );
  });

  test('connection errors are retried, then fail', async () => {
    await expect(
      callFactory('http://127.0.0.1:1/f', 's', { action: 'up' }, identity, { backoffMs: 10, retryMs: 60 }),
    ).rejects.toThrow(/kept failing up/);
  });
});

describe('the fixture factory verifier', () => {
  let child: ChildProcess;
  let dir: string;
  let base: string;
  const secret = 'a'.repeat(64);
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'factory-fixture-'));
    writeFileSync(join(dir, 'factory.js'), FACTORY_JS);
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['factory.js'], {
      cwd: dir,
      env: { PATH: process.env.PATH, PORT: String(port), PREVIEW_FACTORY_SECRET: secret, SESSION_KEY: 'k' },
      stdio: 'ignore',
    });
    for (let i = 0; i < 100; i++) {
      if (
        await fetch(`${base}/healthz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('fixture factory did not start');
  });
  afterAll(() => {
    child?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const up = {
    action: 'up',
    testRunId: 'r1',
    testRunShortId: 'abcd0123',
    scenario: { setupId: 's', version: 1, name: 'signed-in' },
    create: { users: [{ email: 'qa+abcd0123@example.com' }] },
  };

  test('accepts a request signed by callFactory and answers a session cookie', async () => {
    const answer = parseUpAnswer(await callFactory(`${base}/_preview/factory`, secret, up, (t) => t));
    expect(answer.auth?.cookies?.[0]).toMatchObject({ name: 'session' });
    expect(answer.refs).toEqual({ email: 'qa+abcd0123@example.com' });
  });

  test('refuses a tampered body (401), and records it unverified', async () => {
    const body = JSON.stringify(up);
    const signature = signBody(secret, body);
    const res = await fetch(`${base}/_preview/factory`, {
      method: 'POST',
      headers: { 'x-signature': signature },
      body: body.replace('r1', 'r2'),
    });
    expect(res.status).toBe(401);
    const received = (await (await fetch(`${base}/_preview/received`)).json()) as { verified: boolean }[];
    expect(received.at(-1)!.verified).toBe(false);
    await expect(callFactory(`${base}/_preview/factory`, 'wrong-secret', up, (t) => t)).rejects.toThrow(
      /refused up .*401/,
    );
  });
});

describe('preview.yaml factory and the signing secret', () => {
  test('`factory: {app, path}` must name an app of the file', async () => {
    const { parsePreviewConfig } = await import('../environments/preview-config.js');
    const base = 'apps:\n  web:\n    port: 3000\n  api:\n    port: 4000\n';
    expect(parsePreviewConfig(`${base}factory:\n  app: api\n  path: /_preview/factory\n`).factory).toEqual({
      app: 'api',
      path: '/_preview/factory',
    });
    expect(() => parsePreviewConfig(`${base}factory:\n  app: nope\n  path: /f\n`)).toThrow('factory.app');
    expect(() => parsePreviewConfig(`${base}factory:\n  app: api\n  path: f\n`)).toThrow('factory.path');
  });

  test('the secret: 32 random bytes (hex) in the reserved bundle, created once, rotatable', async () => {
    const {
      ensureFactorySecret,
      factorySecret,
      rotateFactorySecret,
      FACTORY_SECRET_APP,
      FACTORY_SECRET_VAR,
    } = await import('./factory.js');
    const bundles = new Map<string, Record<string, string>>();
    const store = {
      read: async (ref: { applicationId: string; app: string }) =>
        bundles.get(`${ref.applicationId}/${ref.app}`),
      write: async (ref: { applicationId: string; app: string }, v: Record<string, string>) => {
        bundles.set(`${ref.applicationId}/${ref.app}`, v);
      },
    };
    expect(await factorySecret(store, 'app1')).toBeUndefined();
    const first = await ensureFactorySecret(store, 'app1');
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(await ensureFactorySecret(store, 'app1')).toBe(first);
    expect(await factorySecret(store, 'app1')).toBe(first);
    expect(bundles.get(`app1/${FACTORY_SECRET_APP}`)).toEqual({ [FACTORY_SECRET_VAR]: first });
    const rotated = await rotateFactorySecret(store, 'app1');
    expect(rotated).not.toBe(first);
    expect(await factorySecret(store, 'app1')).toBe(rotated);
  });
});

describe('callFactory with extra headers', () => {
  let server: Server;
  let url: string;
  const seen: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => res.writeHead(401, { 'content-type': 'text/plain' }).end('protected'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/f`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('sends the cookie; the signature and content type stay its own; the error never quotes the cookie', async () => {
    const err = await callFactory(url, 's', { action: 'up' }, (t) => t, {
      headers: { cookie: 'preview_access=v1.9.secret-token', 'x-signature': 'forged' },
    }).catch((e: Error) => e);
    expect(seen[0]!.cookie).toBe('preview_access=v1.9.secret-token');
    expect(seen[0]!['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(seen[0]!['content-type']).toBe('application/json');
    expect(String(err)).toContain('refused up');
    expect(String(err)).not.toContain('secret-token');
  });
});
