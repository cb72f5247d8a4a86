import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type LinkCheck, MEDIA_URL_TTL_SECONDS, type MediaStore } from './port.js';
import { checkSignedQuery, encodeKey, mediaContentType, signedQuery } from './signing.js';

/** Where the local server serves media: `/media/<key>?expires=…&sig=…`. */
export const LOCAL_MEDIA_PREFIX = '/media/';

/**
 * Local media: one file per key under `<dataDir>/media`, served by the local server (lib/local/media-routes.ts)
 * at URLs signed with a key kept in `<dataDir>/media-link.key` (created on first use, mode 0600), so
 * links survive a restart. `now` is the clock signatures are minted and checked against (tests move it).
 */
export class LocalMediaStore implements MediaStore {
  private readonly root: string;
  private readonly keyPath: string;
  private key: Buffer | undefined;
  now: () => number;

  constructor(dataDir: string, opts: { now?: () => number } = {}) {
    this.root = join(dataDir, 'media');
    this.keyPath = join(dataDir, 'media-link.key');
    this.now = opts.now ?? Date.now;
  }

  private linkKey(): Buffer {
    if (this.key) return this.key;
    if (!existsSync(this.keyPath)) {
      mkdirSync(dirname(this.keyPath), { recursive: true, mode: 0o700 });
      // `wx`: two processes on one data dir (server and CLI) never overwrite each other's key.
      try {
        writeFileSync(this.keyPath, randomBytes(32), { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    this.key = readFileSync(this.keyPath);
    return this.key;
  }

  /** The file of a key (undefined when the key would leave the media folder). */
  pathOf(key: string): string | undefined {
    const path = join(this.root, key);
    return path.startsWith(`${this.root}/`) ? path : undefined;
  }

  async put(key: string, body: Buffer, _contentType: string): Promise<void> {
    const target = this.pathOf(key);
    if (!target) throw new Error('media key escapes the media folder');
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
    try {
      writeFileSync(tmp, body, { mode: 0o600 });
      renameSync(tmp, target);
    } finally {
      rmSync(tmp, { force: true });
    }
  }

  async url(key: string, baseUrl: string): Promise<string> {
    const path = `${LOCAL_MEDIA_PREFIX}${encodeKey(key)}`;
    return `${baseUrl}${path}?${await this.signLink(path, MEDIA_URL_TTL_SECONDS)}`;
  }

  async signLink(path: string, ttlSeconds: number): Promise<string> {
    return signedQuery(this.linkKey(), path, ttlSeconds, this.now());
  }

  async checkLink(path: string, expires: string | undefined, sig: string | undefined): Promise<LinkCheck> {
    return checkSignedQuery(this.linkKey(), path, expires, sig, this.now());
  }

  /** The stored object of a key, for the local server: its file, size and content type. */
  object(key: string): { path: string; size: number; contentType: string } | undefined {
    const path = this.pathOf(key);
    if (!path || !existsSync(path)) return undefined;
    const stat = statSync(path);
    if (!stat.isFile()) return undefined;
    return { path, size: stat.size, contentType: mediaContentType(key) };
  }
}
