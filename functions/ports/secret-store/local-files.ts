import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BundleRef, SecretStore } from './port.js';

/**
 * Local secret store: one file per bundle under `<dataDir>/secrets`, AES-256-GCM encrypted with a key in
 * `<dataDir>/secrets.key` (mode 0600, created on first use). File names are hashes of the bundle ref, so
 * not even application ids or app names are readable on disk. Writes are atomic (temp file + rename).
 */
export class LocalSecretStore implements SecretStore {
  private readonly dir: string;
  private readonly key: Buffer;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'secrets');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const keyPath = join(dataDir, 'secrets.key');
    if (!existsSync(keyPath)) writeFileSync(keyPath, randomBytes(32), { mode: 0o600, flag: 'wx' });
    this.key = readFileSync(keyPath);
  }

  private file(ref: BundleRef): string {
    const id = createHash('sha256').update(`${ref.applicationId}\0${ref.app}`).digest('hex');
    return join(this.dir, `${id}.bin`);
  }

  async read(ref: BundleRef): Promise<Record<string, string> | undefined> {
    let blob: Buffer;
    try {
      blob = await readFile(this.file(ref));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const iv = blob.subarray(0, 12);
    const tag = blob.subarray(12, 28);
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    decipher.setAAD(Buffer.from(`${ref.applicationId}\0${ref.app}`));
    const plain = Buffer.concat([decipher.update(blob.subarray(28)), decipher.final()]);
    return JSON.parse(plain.toString('utf8')) as Record<string, string>;
  }

  async write(ref: BundleRef, values: Record<string, string>): Promise<void> {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(`${ref.applicationId}\0${ref.app}`));
    const body = Buffer.concat([cipher.update(JSON.stringify(values), 'utf8'), cipher.final()]);
    const target = this.file(ref);
    const tmp = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(tmp, Buffer.concat([iv, cipher.getAuthTag(), body]), { mode: 0o600 });
    await rename(tmp, target);
  }
}
