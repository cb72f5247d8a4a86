import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { USAGE } from './args.js';

describe('the bundle bin/previewctl.mjs runs', () => {
  test('is built from any directory, its sources named from the root (so it is found fresh next time)', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'cli-cwd-'));
    try {
      const root = new URL('../..', import.meta.url).pathname;
      const run = () =>
        spawnSync(process.execPath, [join(root, 'bin/previewctl.mjs'), '--help'], { cwd, encoding: 'utf8' });
      // A source newer than the bundle: the shim rebuilds it.
      const source = join(root, 'lib/cli/format.ts');
      utimesSync(source, new Date(), new Date());
      expect(run().stdout).toBe(`${USAGE}\n`);
      const inputs = JSON.parse(readFileSync(join(root, 'dist/previewctl.inputs.json'), 'utf8')) as string[];
      expect(inputs).toContain('lib/cli/main.ts');
      // The CLI's own files and dotenv's parser (node built-ins only), never the service's code.
      for (const input of inputs)
        expect(input).toMatch(/^lib\/cli\/[a-z-]+\.ts$|(^|\/)node_modules\/dotenv\//);
      // The table is in it; the admin half, which loads the service's code, is not.
      expect(inputs).toContain('lib/cli/command-table.ts');
      expect(inputs).not.toContain('lib/cli/admin-commands.ts');
      const built = statSync(join(root, 'dist/previewctl.mjs')).mtimeMs;
      expect(built).toBeGreaterThanOrEqual(statSync(source).mtimeMs);
      // Fresh now: the next call leaves it as it is.
      expect(run().status).toBe(0);
      expect(statSync(join(root, 'dist/previewctl.mjs')).mtimeMs).toBe(built);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
