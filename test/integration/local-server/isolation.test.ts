import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type Harness, startHarness } from '../../support/harness.js';
import { attackFindsNothing, isolationSkipReason } from '../../support/isolation.js';

/*
 * Issue 8, finding 1 (critical), through the real local server as the integration harness runs it
 * (working copies under PREVIEW_WORK_DIR=<data dir>/work): organization B's build and app read
 * /proc/*\/environ, the data dir and other working copies, and find nothing of organization A or of the
 * server. See test/support/isolation.ts for the attack.
 */

const skip = isolationSkipReason();
let h: Harness;
let gitRoot: string;
const isolationVar = process.env.PREVIEW_ISOLATION;

beforeAll(async () => {
  if (skip) return;
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
  // Required, not auto: where bubblewrap is not usable the server refuses to start, and this test fails.
  process.env.PREVIEW_ISOLATION = 'bwrap';
  h = await startHarness({ gitRoot });
}, 60_000);
afterAll(async () => {
  if (skip) return;
  await h?.stop();
  rmSync(gitRoot, { recursive: true, force: true });
  if (isolationVar === undefined) delete process.env.PREVIEW_ISOLATION;
  else process.env.PREVIEW_ISOLATION = isolationVar;
});

describe('local runtime isolation (working copies under the data dir)', () => {
  const maybe = skip ? test.skip : test;
  maybe(
    `another organization's build and app find nothing of organization A or of the server${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      expect(h.service.runtime.isolation).toBe('bwrap');
      await attackFindsNothing({
        service: h.service,
        gitRoot,
        workRoot: join(h.dataDir, 'work'),
        logs: h.logs,
      });
    },
    120_000,
  );
});
