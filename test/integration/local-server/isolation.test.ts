import { describe, expect, test } from '@jest/globals';
import { attackFindsNothing, isolationSkipReason } from '../../support/isolation.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * The isolation attack (a build reads other environments), through the real local server as the integration
 * harness runs it (working copies under PREVIEW_WORK_DIR=<data dir>/work): organization B's build and app
 * read /proc/*\/environ, the data dir and other working copies, and find nothing of organization A or of the
 * server. See test/support/isolation.ts for the attack.
 */

const skip = isolationSkipReason();
// Required, not auto: where bubblewrap is not usable the server refuses to start, and this test fails.
const h = localServerForFile({ env: { PREVIEW_ISOLATION: 'bwrap' }, skip: skip !== undefined });

describe('local runtime isolation (working copies under the data dir)', () => {
  const maybe = skip ? test.skip : test;
  maybe(
    `another organization's build and app find nothing of organization A or of the server${skip ? ` (skipped: ${skip})` : ''}`,
    async () => {
      expect(h.service.runtime.isolation).toBe('bwrap');
      await attackFindsNothing({
        service: h.service,
        gitRoot: h.gitRoot,
        workRoot: h.workDir,
        logs: h.logs,
      });
    },
    120_000,
  );
});
