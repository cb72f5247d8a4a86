import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { setLogSink } from '../../../functions/shared/log.js';
import { defaultWorkDir } from '../../../lib/local/adapters.js';
import { type LocalService, startLocal } from '../../../lib/local/server.js';
import { attackFindsNothing, isolationSkipReason } from '../../support/isolation.js';

/*
 * Issue 8, finding 1, with working copies where `npm start` puts them by default: the work dir under the
 * OS temp dir (`$TMPDIR/preview-work-<hash>`), beside (not inside) the data dir. The same attack as
 * isolation.test.ts finds nothing of organization A or of the server.
 */

const skip = isolationSkipReason();
let service: LocalService;
let dataDir: string;
let gitRoot: string;
const logs: string[] = [];
const saved = { isolation: process.env.PREVIEW_ISOLATION, workDir: process.env.PREVIEW_WORK_DIR };

beforeAll(async () => {
  if (skip) return;
  dataDir = mkdtempSync(join(tmpdir(), 'preview-it-'));
  gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
  setLogSink((line) => logs.push(line));
  process.env.PREVIEW_ISOLATION = 'bwrap';
  delete process.env.PREVIEW_WORK_DIR;
  service = await startLocal({ dataDir, port: 0, gitRoot });
}, 60_000);
afterAll(async () => {
  if (skip) return;
  await service?.stop();
  for (const dir of [dataDir, gitRoot, defaultWorkDir(dataDir)])
    rmSync(dir, { recursive: true, force: true });
  for (const [name, value] of [
    ['PREVIEW_ISOLATION', saved.isolation],
    ['PREVIEW_WORK_DIR', saved.workDir],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe('local runtime isolation (working copies in the default work dir)', () => {
  const maybe = skip ? test.skip : test;
  maybe(
    `another organization's build and app find nothing of organization A or of the server${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      expect(service.runtime.isolation).toBe('bwrap');
      await attackFindsNothing({ service, gitRoot, workRoot: defaultWorkDir(dataDir), logs });
    },
    120_000,
  );
});
