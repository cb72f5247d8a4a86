import { createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Artifacts } from './port.js';

/** Local artifacts: one file per key under `<dataDir>/artifacts`, written atomically (temp file + rename). */
export class LocalArtifacts implements Artifacts {
  private readonly root: string;

  constructor(dataDir: string) {
    this.root = join(dataDir, 'artifacts');
  }

  location(key: string): string {
    const path = join(this.root, key);
    if (!path.startsWith(`${this.root}/`)) throw new Error('artifact key escapes the artifacts folder');
    return path;
  }

  async exists(key: string): Promise<boolean> {
    return existsSync(this.location(key));
  }

  async put(key: string, body: Readable, _contentType?: string): Promise<void> {
    const target = this.location(key);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    const tmp = `${target}.${process.pid}.${Date.now()}.tmp`;
    try {
      await pipeline(body, createWriteStream(tmp, { mode: 0o600 }));
      renameSync(tmp, target);
    } finally {
      rmSync(tmp, { force: true });
    }
  }
}
