import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { bearer, call, type Harness, linkRepo, startHarness } from './harness.js';

/*
 * What the local-server test files share around their own tests: the server of the file, with a git root
 * of its own, and a deploy requested through the API.
 */

/** The file's local server (`Harness`), with its git root and the first organization's API headers. */
export interface SuiteHarness extends Harness {
  /** The git root the server reads repositories from (`makeRepo(h.gitRoot, …)`). */
  gitRoot: string;
  /** The first organization's bearer headers (preview, secrets and recipe routes). */
  auth: Record<string, string>;
}

/**
 * The local server for a test file, with a fresh git root: started before the file's tests (and before
 * the hooks the file registers after this call), with `env` set first (settings the server reads, such as
 * PREVIEW_READY_TIMEOUT_SECONDS); stopped after them, the git root removed and `env` restored. The object
 * is filled in when the file's tests start: read it in hooks and tests, not while the file loads.
 */
export function harnessForFile(opts: { env?: Record<string, string> } = {}): SuiteHarness {
  const h = {} as SuiteHarness;
  const saved: Record<string, string | undefined> = {};
  beforeAll(async () => {
    for (const [name, value] of Object.entries(opts.env ?? {})) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    const gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
    const started = await startHarness({ gitRoot });
    Object.assign(h, started, { gitRoot, auth: bearer(started.org) });
  });
  afterAll(async () => {
    await h.stop?.();
    if (h.gitRoot) rmSync(h.gitRoot, { recursive: true, force: true });
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }, 30_000);
  return h;
}

/**
 * POST a deploy of `repo` pull request `pr` at `sha` as the first organization (its application linked
 * first; 202 expected). Returns the environment's status path.
 */
export async function requestDeploy(h: Harness, repo: string, pr: number, sha: string): Promise<string> {
  await linkRepo(h.org, repo);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: pr, headSha: sha, headRef: 'feature' },
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  return `/v1/preview/environments/${repo}/${pr}`;
}
