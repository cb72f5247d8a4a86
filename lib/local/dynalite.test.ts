import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from '@jest/globals';

/*
 * dynalite.ts patches dynalite's internals, so the version it was written against is pinned exactly
 * (docs/contributing.md, "Pinned dependencies"): a caret range would let a patch release move them.
 */
const root = new URL('../../', import.meta.url);
const readJson = (path: string) => JSON.parse(readFileSync(new URL(path, root), 'utf8'));

describe('the dynalite pin', () => {
  const pinned: string = readJson('package.json').dependencies.dynalite;

  it('is an exact version in package.json, not a range', () => {
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('is what package-lock.json records and what is installed', () => {
    const lock = readJson('package-lock.json');
    expect(lock.packages[''].dependencies.dynalite).toBe(pinned);
    expect(lock.packages['node_modules/dynalite'].version).toBe(pinned);
    const installed = createRequire(import.meta.url)('dynalite/package.json') as { version: string };
    expect(installed.version).toBe(pinned);
  });
});
