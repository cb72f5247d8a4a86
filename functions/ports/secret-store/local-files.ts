import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BundleRef, SecretStore } from './port.js';

/**
 * Local secret store: one file per bundle under `<dataDir>/secrets`, AES-256-GCM encrypted with a key in
 * `<dataDir>/secrets.key` (mode 0600, created on first use). File names are hashes of the bundle ref, so
 * not even application ids or app names are readable on disk.
 *
 * A write is atomic without replacing a file by rename: the new version goes to a temp file; the current
 * file, if any, is moved aside to `<hash>.prev.bin` (the version before it removed first); then the temp
 * file takes the current name. Renaming over an existing file makes ext4 (`auto_da_alloc`) start writing
 * the new file's data back there and then, which cost 0.7 ms of every write of the local server under
 * load; a rename onto a free name does not. A read takes the current file, or the previous one while a
 * write is between its two renames (or crashed there: the write was never acknowledged). As Secrets
 * Manager keeps `AWSPREVIOUS`, the version before the last write stays on disk, encrypted alike.
 *
 * A write is synchronous: a bundle is at most 64 KB, and its steps block for about 0.1 ms, where the same
 * steps through the thread pool (open, write, close, renames: a round trip each, sharing the pool with
 * dynalite's LevelDB) took 1–2.5 ms of every secret upsert of the local server (measured on sequential
 * upserts). Reads stay asynchronous. Callers serialize writers of one bundle (port.ts).
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

  /** The bundle's current file and the one its last write moved aside. */
  private files(ref: BundleRef): { current: string; previous: string } {
    const id = createHash('sha256').update(`${ref.applicationId}\0${ref.app}`).digest('hex');
    return { current: join(this.dir, `${id}.bin`), previous: join(this.dir, `${id}.prev.bin`) };
  }

  async read(ref: BundleRef): Promise<Record<string, string> | undefined> {
    const { current, previous } = this.files(ref);
    // Current, else previous (a write between its renames); twice, for a write that completed, and the
    // next began, between the two looks.
    for (const file of [current, previous, current, previous]) {
      const blob = await readFile(file).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      });
      if (blob) return this.decrypt(ref, blob);
    }
    return undefined;
  }

  private decrypt(ref: BundleRef, blob: Buffer): Record<string, string> {
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
    const { current, previous } = this.files(ref);
    const tmp = `${current}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, Buffer.concat([iv, cipher.getAuthTag(), body]), { mode: 0o600 });
    // Only when a current file exists is the previous one stale (else it is the bundle: a crashed write).
    if (existsSync(current)) {
      rmSync(previous, { force: true });
      try {
        renameSync(current, previous);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    renameSync(tmp, current);
  }
}
