import { existsSync, lstatSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomSecret } from '../../shared/crypto.js';
import { ServiceUnavailableError } from '../../shared/errors.js';
import type { WebhookSecret } from './port.js';

/** Where the local server keeps the webhook secret it generated. */
export const localWebhookSecretPath = (dataDir: string): string => join(dataDir, 'github-webhook-secret');

/** Where the local webhook secret comes from, as the server reports it at start. */
export type LocalWebhookSecretSource = { from: 'env' } | { from: 'file'; path: string; created: boolean };

/**
 * Make sure a local webhook secret exists: PREVIEW_GITHUB_WEBHOOK_SECRET when set, else the file in the
 * data dir, generated on first start (256 random bits, base64url, mode 0600; a symlink is refused).
 */
export function ensureLocalWebhookSecret(dataDir: string, fromEnv?: string): LocalWebhookSecretSource {
  if (fromEnv) return { from: 'env' };
  const path = localWebhookSecretPath(dataDir);
  if (existsSync(path)) {
    if (lstatSync(path).isSymbolicLink())
      throw new Error(`${path} is a symlink; refusing to use it as the webhook secret`);
    return { from: 'file', path, created: false };
  }
  writeFileSync(path, `${randomSecret()}\n`, { mode: 0o600, flag: 'wx' });
  return { from: 'file', path, created: true };
}

/** The local webhook secret: the configured one, else the data dir's file (read on each delivery). */
export class LocalWebhookSecret implements WebhookSecret {
  constructor(
    private readonly dataDir: string,
    private readonly fromEnv?: string,
  ) {}

  async current(): Promise<string> {
    if (this.fromEnv) return this.fromEnv;
    const path = localWebhookSecretPath(this.dataDir);
    let secret = '';
    try {
      secret = readFileSync(path, 'utf8').trim();
    } catch {
      // missing: below
    }
    if (!secret)
      throw new ServiceUnavailableError(
        'no GitHub webhook secret: set PREVIEW_GITHUB_WEBHOOK_SECRET or start the local server once',
      );
    return secret;
  }
}
