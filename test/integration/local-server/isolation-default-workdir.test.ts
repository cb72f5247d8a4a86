import { describe, expect, test } from '@jest/globals';
import { defaultWorkDir } from '../../../lib/local/adapters.js';
import { attackFindsNothing, isolationSkipReason } from '../../support/isolation.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * The isolation attack (a build reads other environments), with working copies where `npm start` puts them by
 * default: the work dir under the OS temp dir (`$TMPDIR/preview-work-<hash>`), beside (not inside) the data
 * dir. The same attack as isolation.test.ts finds nothing of organization A or of the server.
 */

const skip = isolationSkipReason();
const h = localServerForFile({
  env: { PREVIEW_ISOLATION: 'bwrap' },
  workDir: 'default',
  skip: skip !== undefined,
});

describe('local runtime isolation (working copies in the default work dir)', () => {
  const maybe = skip ? test.skip : test;
  maybe(
    `another organization's build and app find nothing of organization A or of the server${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      expect(h.service.runtime.isolation).toBe('bwrap');
      await attackFindsNothing({
        service: h.service,
        gitRoot: h.gitRoot,
        workRoot: defaultWorkDir(h.dataDir),
        logs: h.logs,
      });
    },
    120_000,
  );
});
