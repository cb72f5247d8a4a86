import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import type { LocalRuntime } from './state.js';
import { removeUnowned } from './working-copies.js';

/*
 * Working copies no environment owns are removed at start: after the data dir (and its
 * state.json) was deleted, the work dir outside it still held every environment's copies.
 */

const root = mkdtempSync(join(tmpdir(), 'working-copies-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('removeUnowned', () => {
  test("removes the environments' folders the state does not know, and only those", () => {
    const workDir = join(root, 'work');
    const copy = (env: string, app: string) => {
      mkdirSync(join(workDir, env, app), { recursive: true });
      writeFileSync(join(workDir, env, app, 'server.js'), '');
    };
    copy('org-a/acme/shop/1', 'web-b1');
    copy('org-a/acme/shop/2', 'web-b2');
    copy('org-b/other/site/7', 'api-b3');
    mkdirSync(join(workDir, 'not-an-org-layout'), { recursive: true });
    mkdirSync(join(workDir, 'org-a/acme/shop/notes'), { recursive: true });
    const rt = {
      opts: { workDir },
      state: { envs: { 'org-a/acme/shop/1': { fence: 1, apps: {}, buildPids: [] } } },
    } as unknown as LocalRuntime;

    expect(removeUnowned(rt)).toBe(2);
    expect(existsSync(join(workDir, 'org-a/acme/shop/1/web-b1/server.js'))).toBe(true);
    expect(existsSync(join(workDir, 'org-a/acme/shop/2'))).toBe(false);
    // Its parents, left empty, go too; folders of another shape stay.
    expect(existsSync(join(workDir, 'org-b'))).toBe(false);
    expect(existsSync(join(workDir, 'not-an-org-layout'))).toBe(true);
    expect(existsSync(join(workDir, 'org-a/acme/shop/notes'))).toBe(true);
    expect(removeUnowned(rt)).toBe(0);
  });

  test('a work dir that does not exist yet: nothing to remove', () => {
    const rt = { opts: { workDir: join(root, 'none') }, state: { envs: {} } } as unknown as LocalRuntime;
    expect(removeUnowned(rt)).toBe(0);
  });
});
