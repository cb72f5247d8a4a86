import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { bearer, call } from '../../support/api.js';
import { pollUntil, SERVER_JS } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * A teardown racing a clone (hardening): a DELETE 40–80 ms after a POST, while the runtime was still cloning,
 * ended `failed: ENOTEMPTY … rmdir …/.git` in 8 of 20 races (the teardown removed the working copy while git
 * was still writing it), and the error showed a path of the server. Now the teardown cancels the clone, waits
 * for git to exit, then removes: `torn_down` every time, with no error and nothing left on disk.
 */

const RACES = 20;
const REPO = 'acme/big';
const h = localServerForFile();
let sha: string;

/** Enough files that a checkout takes a few hundred milliseconds: the DELETE lands while it runs. */
function bigTree(): Record<string, string> {
  const files: Record<string, string> = {
    'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n    health: /healthz\n',
    'server.js': SERVER_JS,
    VERSION: 'big',
  };
  for (let d = 0; d < 40; d++)
    for (let f = 0; f < 50; f++) files[`d${d}/f${f}.txt`] = `${d}-${f}-${'x'.repeat(3_000)}\n`;
  return files;
}

beforeAll(async () => {
  sha = makeRepo(h.gitRoot, REPO, bigTree());
  await createApplication({ orgId: h.org.orgId, repoFullName: REPO });
}, 60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a teardown racing the clone of a deploy', () => {
  test(`${RACES} races of POST then DELETE 40–80 ms later: every one ends torn_down, without error`, async () => {
    const auth = bearer(h.org);
    const outcomes: { pr: number; delayMs: number; status: string; error?: string }[] = [];
    for (let pr = 1; pr <= RACES; pr++) {
      const delayMs = 40 + Math.round(Math.random() * 40);
      const posted = await call(h, 'POST', '/v1/preview/environments', {
        body: { repoFullName: REPO, prNumber: pr, headSha: sha, headRef: `race-${pr}` },
        headers: auth,
      });
      expect(posted.status).toBe(202);
      await sleep(delayMs);
      const path = `/v1/preview/environments/${REPO}/${pr}`;
      expect((await call(h, 'DELETE', path, { headers: auth })).status).toBe(202);
      const end = await pollUntil(
        h,
        h.org,
        path,
        (s) => s.status === 'torn_down' || s.status === 'failed',
        30_000,
      );
      outcomes.push({ pr, delayMs, status: end.status, error: end.error });
    }
    await h.service.workflows.idle();

    expect(outcomes.filter((o) => o.status !== 'torn_down' || o.error !== undefined)).toEqual([]);
    // Nothing of any race is left on disk, and nothing runs.
    const envRoot = join(h.dataDir, 'work', h.org.orgId, ...REPO.split('/'));
    const left = existsSync(envRoot) ? readdirSync(envRoot) : [];
    expect(left).toEqual([]);
    for (let pr = 1; pr <= RACES; pr++)
      expect(
        h.service.runtime.running({ orgId: h.org.orgId, envKey: `${REPO}#${pr}` }, 'web'),
      ).toBeUndefined();
    // And no error a caller could see names a path of this machine (the original one did).
    for (let pr = 1; pr <= RACES; pr++) {
      const res = await call(h, 'GET', `/v1/preview/environments/${REPO}/${pr}`, { headers: auth });
      expect(res.text).not.toContain(h.dataDir);
      expect(res.text).not.toContain(h.gitRoot);
    }
  }, 120_000);
});
