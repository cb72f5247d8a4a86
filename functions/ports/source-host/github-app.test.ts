import type { Readable } from 'node:stream';
import {
  DecryptionFailure,
  GetSecretValueCommand,
  InternalServiceError,
  SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { appKeyPair, FakeGitHub, faults } from '../../../test/cloud/fakes/github.js';
import { tableNames, tables } from '../../manifest/tables.js';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { setLogSink } from '../../shared/log.js';
import { TransientError } from '../../shared/step-errors.js';
import { GitHubAppSourceHost, type GitHubAppSourceHostOptions } from './github-app.js';
import { GitHubAppCredentials, parseGitHubAppSecret } from './github-app-secret.js';

/*
 * What the SourceHost contract cannot show about the GitHub App adapter: its GitHub calls, token caching,
 * retries and rate limits, and the errors an operator sees for bad credentials. Against the fake GitHub
 * REST API, with the App secret in the loopback fake Secrets Manager (a real SecretsManagerClient sent there
 * through AWS_ENDPOINT_URL_SECRETS_MANAGER); the failures of a secret read are scripted at the SDK boundary
 * (aws-sdk-client-mock).
 */

const ARN = 'arn:aws:secretsmanager:eu-west-1:000000000000:secret:preview/github-app-AbCdEf';
const APP_ID = '123456';
const FILES = { 'preview.yaml': 'apps: {}\n', 'src/app.js': 'console.log(1)\n' };
const MINUTE = 60_000;

const aws = new FakeAws(new URL('../../..', import.meta.url).pathname);
let keys: { privateKey: string; publicKey: string };
let otherKeys: { privateKey: string; publicKey: string };
let client: SecretsManagerClient;
const logLines: string[] = [];

beforeAll(async () => {
  await aws.start();
  keys = appKeyPair();
  otherKeys = appKeyPair();
  process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = aws.url;
  client = new SecretsManagerClient({
    region: 'eu-west-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  setLogSink((line) => logLines.push(line));
});
afterAll(async () => {
  setLogSink((line) => process.stdout.write(`${line}\n`));
  await aws.stop();
});

let github: FakeGitHub;
let sha: string;
let clock: number;
let sleeps: number[];

beforeEach(async () => {
  github = await new FakeGitHub().start();
  github.addApp(APP_ID, keys.publicKey);
  github.addRepo('acme/shop');
  sha = github.addCommit('acme/shop', FILES, 'main');
  github.addInstallation(42, APP_ID, ['acme/shop']);
  aws.secrets.set(
    ARN,
    JSON.stringify({ appId: APP_ID, privateKey: keys.privateKey, webhookSecret: 'whsec' }),
  );
  clock = Date.now();
  github.now = () => clock;
  sleeps = [];
  logLines.length = 0;
});
afterEach(async () => {
  await github.stop();
});

function makeHost(opts: Partial<GitHubAppSourceHostOptions> = {}) {
  return new GitHubAppSourceHost({
    credentials: new GitHubAppCredentials(client, ARN),
    apiUrl: github.url,
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...opts,
  });
}

async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks);
}

/** Neither the key nor any line of it appears in `text`. */
function expectNoKey(text: string, privateKey = keys.privateKey) {
  for (const line of privateKey.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----')))
    expect(text).not.toContain(line);
}

describe('GitHubAppSourceHost: the GitHub calls', () => {
  test('a deploy (FetchSource, ReadConfig, the image build) makes these calls, in order', async () => {
    const host = makeHost();
    expect(await host.installation('acme/shop')).toEqual({ installationId: '42' });
    expect(await host.hasCommit('acme/shop', sha)).toBe(true);
    expect(await host.readFile('acme/shop', sha, 'preview.yaml')).toBe(FILES['preview.yaml']);
    expect((await drain(await host.archive('acme/shop', sha))).length).toBeGreaterThan(0);
    expect(github.calls()).toEqual([
      'GET /repos/acme/shop/installation',
      'POST /app/installations/42/access_tokens',
      `GET /repos/acme/shop/commits/${sha}`,
      'GET /repos/acme/shop/contents/preview.yaml',
      `GET /repos/acme/shop/tarball/${sha}`,
      `GET /_codeload/acme/shop/legacy.tar.gz/${sha}`,
    ]);
    expect(github.requests[3]!.query).toBe(`?ref=${sha}`);
  });

  test('resolveBranch: the ref; on a 404, the repository tells ref-not-found from repository-not-found', async () => {
    const host = makeHost();
    expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'found', sha });
    expect(await host.resolveBranch('acme/shop', 'nope')).toEqual({ kind: 'ref-not-found' });
    github.removeRepo('acme/shop'); // deleted while its installation is remembered
    expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'repository-not-found' });
    expect(github.calls()).toEqual([
      'GET /repos/acme/shop/installation',
      'POST /app/installations/42/access_tokens',
      'GET /repos/acme/shop/git/ref/heads/main',
      'GET /repos/acme/shop/git/ref/heads/nope',
      'GET /repos/acme/shop',
      'GET /repos/acme/shop/git/ref/heads/main',
      'GET /repos/acme/shop',
    ]);
  });

  test("pullRequestHead: the pull request's head.sha, undefined on a 404; a 5xx is retried, then TransientError", async () => {
    const host = makeHost();
    const b = github.addCommit('acme/shop', FILES);
    github.setPull('acme/shop', 7, { headSha: b.toUpperCase(), headRef: 'feature' });
    expect(await host.pullRequestHead('acme/shop', { number: 7, headRef: 'feature' })).toBe(b);
    expect(await host.pullRequestHead('acme/shop', { number: 8, headRef: 'feature' })).toBeUndefined();
    expect(github.calls()).toEqual([
      'GET /repos/acme/shop/installation',
      'POST /app/installations/42/access_tokens',
      'GET /repos/acme/shop/pulls/7',
      'GET /repos/acme/shop/pulls/8',
    ]);
    // Never guessed: GitHub unreachable is an error the event's retries deal with.
    github.failNext('/repos/acme/shop/pulls/7', 100, faults.serverError(502));
    await expect(host.pullRequestHead('acme/shop', { number: 7, headRef: 'feature' })).rejects.toMatchObject({
      name: 'TransientError',
      message: expect.stringMatching(
        /reading pull request #7 of acme\/shop \(502 Server Error\), 4 attempts/,
      ),
    });
  });

  test('branch names and file paths with slashes; a directory is not a file', async () => {
    const feature = github.addCommit('acme/shop', { ...FILES, 'a b/c#d.txt': 'x' }, 'feature/login');
    const host = makeHost();
    expect(await host.resolveBranch('acme/shop', 'feature/login')).toEqual({ kind: 'found', sha: feature });
    expect(await host.readFile('acme/shop', feature, 'src/app.js')).toBe(FILES['src/app.js']);
    expect(await host.readFile('acme/shop', feature, 'a b/c#d.txt')).toBe('x');
    expect(await host.readFile('acme/shop', feature, 'src')).toBeUndefined();
    expect(await host.readFile('acme/shop', feature, '../etc/passwd')).toBeUndefined();
  });

  test('the installation is remembered per repository for 5 minutes; a missing one is not', async () => {
    const host = makeHost();
    await host.installation('acme/shop');
    await host.installation('acme/shop');
    expect(await host.installation('acme/elsewhere')).toBeUndefined();
    expect(await host.installation('acme/elsewhere')).toBeUndefined();
    clock += 5 * MINUTE + 1;
    await host.installation('acme/shop');
    expect(github.calls()).toEqual([
      'GET /repos/acme/shop/installation',
      'GET /repos/acme/elsewhere/installation',
      'GET /repos/acme/elsewhere/installation',
      'GET /repos/acme/shop/installation',
    ]);
  });

  test('a GitHub Enterprise Server base URL (with /api/v3) is used for every call', async () => {
    const ghes = await new FakeGitHub('/api/v3').start();
    try {
      ghes.addApp(APP_ID, keys.publicKey);
      ghes.addRepo('acme/shop');
      const head = ghes.addCommit('acme/shop', FILES, 'main');
      ghes.addInstallation(7, APP_ID, ['acme/shop']);
      expect(ghes.url).toMatch(/\/api\/v3$/);
      const host = makeHost({ apiUrl: ghes.url });
      expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'found', sha: head });
      expect((await drain(await host.archive('acme/shop', head))).length).toBeGreaterThan(0);
      expect(ghes.calls()).toHaveLength(5);
      expect(github.calls()).toEqual([]);
    } finally {
      await ghes.stop();
    }
  });

  test('the registry builds this adapter in AWS mode from GITHUB_API_URL and GITHUB_APP_SECRET_ARN', async () => {
    const env: Record<string, string> = {
      PREVIEW_MODE: 'aws',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      GITHUB_API_URL: github.url,
      GITHUB_APP_SECRET_ARN: ARN,
      ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
    };
    Object.assign(process.env, env);
    try {
      const { sourceHost } = await import('../registry.js');
      expect(sourceHost()).toBeInstanceOf(GitHubAppSourceHost);
      expect(await sourceHost().resolveBranch('acme/shop', 'main')).toEqual({ kind: 'found', sha });
      expect(github.calls()[0]).toBe('GET /repos/acme/shop/installation');
    } finally {
      for (const k of Object.keys(env)) delete process.env[k];
    }
  });
});

describe('GitHubAppSourceHost: installation tokens', () => {
  test('one token serves every call until 5 minutes before it expires, then a new one is minted', async () => {
    const host = makeHost({ installationTtlMs: 24 * 60 * MINUTE });
    await host.hasCommit('acme/shop', sha);
    await host.readFile('acme/shop', sha, 'preview.yaml');
    expect(github.tokensMinted).toBe(1);
    clock += 54 * MINUTE; // the token (1 hour) has 6 minutes left
    await host.hasCommit('acme/shop', sha);
    expect(github.tokensMinted).toBe(1);
    clock += 2 * MINUTE; // 4 minutes left
    await host.hasCommit('acme/shop', sha);
    await host.hasCommit('acme/shop', sha);
    expect(github.tokensMinted).toBe(2);
    expect(github.calls().filter((c) => c.startsWith('POST'))).toEqual([
      'POST /app/installations/42/access_tokens',
      'POST /app/installations/42/access_tokens',
    ]);
  });

  test('a token GitHub issues for less than the margin is replaced on every call', async () => {
    github.tokenLifetimeSeconds = 240;
    const host = makeHost();
    await host.hasCommit('acme/shop', sha);
    await host.hasCommit('acme/shop', sha);
    expect(github.tokensMinted).toBe(2);
  });

  test('an installation removed after it was looked up: no installation, and it is forgotten', async () => {
    const host = makeHost();
    expect(await host.installation('acme/shop')).toEqual({ installationId: '42' });
    github.removeInstallation(42);
    expect(await host.hasCommit('acme/shop', sha)).toBe(false); // minting its token answers 404
    expect(await host.resolveBranch('acme/shop', 'main')).toEqual({ kind: 'no-installation' });
    expect(github.calls()).toEqual([
      'GET /repos/acme/shop/installation',
      'POST /app/installations/42/access_tokens',
      'GET /repos/acme/shop/installation',
    ]);
  });
});

describe('GitHubAppSourceHost: retries and rate limits', () => {
  test('5xx is retried with backoff, then succeeds', async () => {
    github.failNext(`/repos/acme/shop/commits/${sha}`, 2, faults.serverError(502));
    github.failNext('/app/installations/42/access_tokens', 1, faults.serverError(500));
    expect(await makeHost().hasCommit('acme/shop', sha)).toBe(true);
    expect(sleeps).toEqual([1000, 1000, 2000]);
    expect(github.calls().filter((c) => c.includes('/commits/'))).toHaveLength(3);
  });

  test('5xx on every attempt → TransientError after 4 attempts', async () => {
    github.failNext(`/repos/acme/shop/tarball/${sha}`, 100, faults.serverError(503));
    const err = await makeHost()
      .archive('acme/shop', sha)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).name).toBe('TransientError');
    expect((err as Error).message).toMatch(
      /GitHub failed while downloading the tarball .* \(503 Server Error\), 4 attempts/,
    );
    expect(sleeps).toEqual([1000, 2000, 4000]);
    expect(github.calls().filter((c) => c.includes('/tarball/'))).toHaveLength(4);
  });

  test('a network failure is retried like a 5xx', async () => {
    const host = makeHost({ apiUrl: 'http://127.0.0.1:1' });
    await expect(host.installation('acme/shop')).rejects.toThrow(TransientError);
    expect(sleeps).toEqual([1000, 2000, 4000]);
  });

  test('a secondary rate limit (403 + retry-after) and a 429 wait as long as GitHub says', async () => {
    github.failNext('/repos/acme/shop/contents/preview.yaml', 1, faults.secondaryRateLimit(1));
    github.failNext('/repos/acme/shop/contents/preview.yaml', 1, faults.tooManyRequests(3));
    expect(await makeHost().readFile('acme/shop', sha, 'preview.yaml')).toBe(FILES['preview.yaml']);
    expect(sleeps).toEqual([1000, 3000]);
  });

  test('the primary rate limit waits until x-ratelimit-reset', async () => {
    const reset = Math.floor(clock / 1000) + 3;
    github.failNext('/repos/acme/shop/installation', 1, faults.primaryRateLimit(reset));
    expect(await makeHost().installation('acme/shop')).toEqual({ installationId: '42' });
    expect(sleeps).toEqual([reset * 1000 - clock]);
  });

  test('a rate limit asking for longer than the cap gives up at once with TransientError', async () => {
    github.failNext(`/repos/acme/shop/commits/${sha}`, 1, faults.secondaryRateLimit(120));
    await expect(makeHost().hasCommit('acme/shop', sha)).rejects.toThrow(
      /GitHub rate limit while looking up commit .* \(403 You have exceeded a secondary rate limit.*\): retry in 120 s/,
    );
    github.failNext(
      '/repos/acme/shop/installation',
      1,
      faults.primaryRateLimit(Math.floor(clock / 1000) + 3600),
    );
    await expect(makeHost().installation('acme/shop')).rejects.toThrow(TransientError);
    expect(sleeps).toEqual([]);
  });

  test('a 403 that is not a rate limit is not retried: the App lacks a permission', async () => {
    github.failNext(`/repos/acme/shop/commits/${sha}`, 1, {
      status: 403,
      message: 'Resource not accessible by integration',
    });
    const err = await makeHost()
      .hasCommit('acme/shop', sha)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect(err).not.toBeInstanceOf(TransientError);
    expect((err as Error).message).toMatch(/403 Resource not accessible by integration/);
    expect(sleeps).toEqual([]);
  });
});

describe('GitHubAppSourceHost: credentials', () => {
  test('the App secret is read once per container', async () => {
    const before = aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length;
    const host = makeHost();
    await host.installation('acme/shop');
    await host.resolveBranch('acme/shop', 'main');
    await host.readFile('acme/shop', sha, 'preview.yaml');
    expect(aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length - before).toBe(1);
  });

  test('a wrong private key: a clear 503 naming the secret, the key in no error and no log line', async () => {
    aws.secrets.set(
      ARN,
      JSON.stringify({ appId: APP_ID, privateKey: otherKeys.privateKey, webhookSecret: 'whsec' }),
    );
    const err = await makeHost()
      .resolveBranch('acme/shop', 'main')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect(err).not.toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe(
      `GitHub rejected the App's credentials (401 Bad credentials): check appId and privateKey in secret ${ARN}`,
    );
    expect(sleeps).toEqual([]);
    const everything = [String((err as Error).stack), JSON.stringify(err), ...logLines].join('\n');
    expectNoKey(everything, otherKeys.privateKey);
    expect(github.calls()).toEqual(['GET /repos/acme/shop/installation']);
  });

  test('an App id GitHub does not know: the same clear error', async () => {
    aws.secrets.set(ARN, JSON.stringify({ appId: 999, privateKey: keys.privateKey, webhookSecret: 'whsec' }));
    await expect(makeHost().installation('acme/shop')).rejects.toThrow(
      /GitHub rejected the App's credentials \(401 Bad credentials\): check appId and privateKey/,
    );
  });

  test.each([
    ['missing', undefined, /the GitHub App secret is empty/],
    ['empty', '', /the GitHub App secret is empty/],
    ['not JSON', `{"privateKey": ${JSON.stringify('KEY')}`, /is not valid JSON/],
    [
      'without privateKey',
      JSON.stringify({ appId: APP_ID, webhookSecret: 'w' }),
      /\(privateKey must be a string\)/,
    ],
    [
      'with a broken key',
      JSON.stringify({
        appId: 'abc',
        privateKey: '-----BEGIN RSA PRIVATE KEY-----\nKEY\n',
        webhookSecret: 'w',
      }),
      /\(appId must be the App's numeric id; privateKey must be the App's private key in PEM/,
    ],
  ])('a secret %s: a clear 503 saying what to put in it, quoting nothing of it', async (_, value, why) => {
    if (value === undefined) aws.secrets.delete(ARN);
    else aws.secrets.set(ARN, value.replace('KEY', keys.privateKey.split('\n')[1]!));
    const err = await makeHost()
      .installation('acme/shop')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as Error).message).toMatch(why);
    expect((err as Error).message).toContain(
      `the operator must fill secret ${ARN} with JSON {"appId": "123456", "privateKey": "-----BEGIN RSA PRIVATE KEY-----\\n...", "webhookSecret": "..."}`,
    );
    expectNoKey(`${(err as Error).message} ${logLines.join('\n')}`);
    expect(github.calls()).toEqual([]);
  });

  test('a failed read is not cached: once the operator fills the secret, the next call works', async () => {
    aws.secrets.delete(ARN);
    const host = makeHost();
    await expect(host.installation('acme/shop')).rejects.toThrow(ServiceUnavailableError);
    aws.secrets.set(ARN, JSON.stringify({ appId: APP_ID, privateKey: keys.privateKey, webhookSecret: 'w' }));
    expect(await host.installation('acme/shop')).toEqual({ installationId: '42' });
  });

  /** Credentials whose Secrets Manager client raises this error on every GetSecretValue (the SDK boundary). */
  function failingSecretsManager(error: Error) {
    const failing = new SecretsManagerClient({ region: 'eu-west-1' });
    const mock = mockClient(failing);
    mock.on(GetSecretValueCommand).rejects(error);
    return {
      sent: () => mock.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input),
      credentials: new GitHubAppCredentials(failing, ARN),
    };
  }
  /** An error the service answered with `status`, as the SDK raises it (modeled or not). */
  const answered = (status: number, code: string) => {
    const opts = { message: `${code} answered`, $metadata: { httpStatusCode: status } };
    if (code === 'InternalServiceError') return new InternalServiceError(opts);
    if (code === 'DecryptionFailure') return new DecryptionFailure(opts);
    return new SecretsManagerServiceException({
      ...opts,
      name: code,
      $fault: status >= 500 ? 'server' : 'client',
    });
  };

  test.each([
    [500, 'InternalServiceError'],
    [400, 'ThrottlingException'],
    [429, 'TooManyRequestsException'],
  ])(
    'a secret read failing with %s %s (past the SDK retries): a TransientError naming the secret',
    async (status, code) => {
      const { sent, credentials } = failingSecretsManager(answered(status, code));
      const err = await makeHost({ credentials })
        .installation('acme/shop')
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as Error).message).toBe(`could not read the GitHub App secret ${ARN} (${code})`);
      expect(sent()).toEqual([{ SecretId: ARN }]);
      expect(github.calls()).toEqual([]);
    },
  );

  test('a secret read with no answer (the network failed): a TransientError', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const { credentials } = failingSecretsManager(refused);
    const err = await makeHost({ credentials })
      .installation('acme/shop')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe(`could not read the GitHub App secret ${ARN} (Error)`);
  });

  test.each([
    [400, 'AccessDeniedException'],
    [400, 'DecryptionFailure'],
  ])('a secret read failing with %s %s: a 503 naming the secret, not transient', async (status, code) => {
    const { sent, credentials } = failingSecretsManager(answered(status, code));
    const err = await makeHost({ credentials })
      .installation('acme/shop')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect(err).not.toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe(`could not read the GitHub App secret ${ARN} (${code})`);
    expect(sent()).toHaveLength(1);
  });

  test("a secret read the service keeps failing is retried by the SDK's standard mode (3 attempts), then transient", async () => {
    aws.failNext('SecretsManager.GetSecretValue', 3, { type: 'InternalServiceError', status: 500 });
    const before = aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length;
    const err = await makeHost()
      .installation('acme/shop')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe(`could not read the GitHub App secret ${ARN} (InternalServiceError)`);
    expect(aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length - before).toBe(3);
    // One failure fewer: the SDK's third attempt reads the secret.
    aws.failNext('SecretsManager.GetSecretValue', 2, { type: 'InternalServiceError', status: 500 });
    expect(await makeHost().installation('acme/shop')).toEqual({ installationId: '42' });
  });

  test('no secret ARN configured: a clear 503', async () => {
    const host = makeHost({ credentials: new GitHubAppCredentials(client, undefined) });
    await expect(host.installation('acme/shop')).rejects.toThrow(/GITHUB_APP_SECRET_ARN is not set/);
  });

  test('parseGitHubAppSecret: a numeric appId and a key with escaped newlines are accepted', () => {
    const escaped = keys.privateKey.replace(/\n/g, '\\n');
    const parsed = parseGitHubAppSecret(
      JSON.stringify({ appId: 123456, privateKey: escaped, webhookSecret: 'w' }),
      ARN,
    );
    expect(parsed).toEqual({ appId: '123456', privateKey: keys.privateKey.trim(), webhookSecret: 'w' });
  });
});
