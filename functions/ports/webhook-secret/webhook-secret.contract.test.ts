import { lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { GitHubAppWebhookSecret } from './github-app.js';
import { ensureLocalWebhookSecret, LocalWebhookSecret, localWebhookSecretPath } from './local-file.js';
import type { WebhookSecret } from './port.js';

/* The WebhookSecret contract: the App secret's field in AWS; locally the variable, else a generated file. */

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'preview-hook-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const generated = () => {
  const dir = tempDir();
  ensureLocalWebhookSecret(dir);
  return new LocalWebhookSecret(dir);
};
const adapters: [string, () => WebhookSecret][] = [
  [
    'GitHubAppWebhookSecret',
    () =>
      new GitHubAppWebhookSecret({
        get: async () => ({ appId: '1', privateKey: 'k', webhookSecret: 'from-the-app' }),
      }),
  ],
  ['LocalWebhookSecret (variable)', () => new LocalWebhookSecret(tempDir(), 'from-the-env')],
  ['LocalWebhookSecret (generated file)', generated],
];

describe.each(adapters)('%s', (_name, make) => {
  test('a non-empty secret, the same on every read', async () => {
    const s = make();
    const a = await s.current();
    expect(a.length).toBeGreaterThan(0);
    expect(await s.current()).toBe(a);
  });
});

describe('the local secret', () => {
  test('generated on first start: 256 bits, mode 0600, kept across starts', () => {
    const dir = tempDir();
    expect(ensureLocalWebhookSecret(dir)).toEqual({
      from: 'file',
      path: localWebhookSecretPath(dir),
      created: true,
    });
    const first = readFileSync(localWebhookSecretPath(dir), 'utf8');
    expect(first.trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(lstatSync(localWebhookSecretPath(dir)).mode & 0o777).toBe(0o600);
    expect(ensureLocalWebhookSecret(dir)).toEqual({
      from: 'file',
      path: localWebhookSecretPath(dir),
      created: false,
    });
    expect(readFileSync(localWebhookSecretPath(dir), 'utf8')).toBe(first);
  });

  test('PREVIEW_GITHUB_WEBHOOK_SECRET wins, and no file is written', () => {
    const dir = tempDir();
    expect(ensureLocalWebhookSecret(dir, 'set')).toEqual({ from: 'env' });
    expect(() => lstatSync(localWebhookSecretPath(dir))).toThrow();
  });

  test('a symlink in its place is refused', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'elsewhere'), 'x');
    symlinkSync(join(dir, 'elsewhere'), localWebhookSecretPath(dir));
    expect(() => ensureLocalWebhookSecret(dir)).toThrow(/symlink/);
  });

  test('none at all: 503 saying how to get one', async () => {
    await expect(new LocalWebhookSecret(tempDir()).current()).rejects.toThrow(ServiceUnavailableError);
  });
});
