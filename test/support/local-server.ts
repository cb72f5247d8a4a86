import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { createOrganization, type OrgCredentials } from '../../functions/core/applications/applications.js';
import { setLogSink } from '../../functions/shared/log.js';
import { defaultWorkDir } from '../../lib/local/adapters.js';
import { type LocalService, startLocal } from '../../lib/local/server.js';
import { bearer, call, linkRepo } from './api.js';

/*
 * The one way a test starts the local server: `localServerForFile(opts)`, the very server `npm start`
 * runs (the same handlers, state machines and local adapters, dynalite under a fresh data dir), in the
 * test's process on a free port, one per test file. What a file needs on top of it (the run tests'
 * fixture apps: runs-suite.ts) is set up on that server, never by starting another. Tests of `npm start`
 * itself run it as a child process (process.ts).
 */

/** The file's local server, as its tests see it. */
export interface LocalServer {
  /** The running service: its runtime, bus, workflows, inbox, webhook secret. */
  service: LocalService;
  /** Its base URL (`http://127.0.0.1:<port>`). */
  url: string;
  /** A fresh data dir (database, secrets, media, credentials file), removed after the file. */
  dataDir: string;
  /** The git root the server reads repositories from (`makeRepo(h.gitRoot, …)`), removed after the file. */
  gitRoot: string;
  /** Where the runtime keeps its working copies (see `LocalServerOptions.workDir`), removed after the file. */
  workDir: string;
  /** The organization created on first start. */
  org: OrgCredentials;
  /** Its bearer headers (preview, secrets and recipe routes). */
  auth: Record<string, string>;
  /** Every log line the server wrote (tests assert secrets never reach them). */
  logs: string[];
  /** A further organization (for cross-organization tests). */
  newOrg(name?: string): Promise<OrgCredentials>;
}

export interface LocalServerOptions {
  /**
   * Settings the server reads when it starts (PREVIEW_READY_TIMEOUT_SECONDS, PREVIEW_ISOLATION…): set
   * before it starts, restored after it stops. Read when the server starts, so a `beforeAll` registered
   * before this call may fill it in (a port found free, say).
   * @default {}
   */
  env?: Record<string, string>;
  /**
   * Where working copies go: `data-dir` under `<dataDir>/work` (PREVIEW_WORK_DIR), `default` where
   * `npm start` puts them when PREVIEW_WORK_DIR is unset (the OS temp dir, beside the data dir).
   * @default 'data-dir'
   */
  workDir?: 'data-dir' | 'default';
  /** Start nothing: for a file whose tests all skip on this host. @default false */
  skip?: boolean;
}

/**
 * The local server for a test file: started before the file's tests (and before the hooks the file
 * registers after this call), stopped after them, its directories removed and `env` restored. The object
 * is filled in when the file's tests start: read it in hooks and tests, not while the file loads. An
 * `afterAll` the file registers after this call runs once the server has stopped.
 */
export function localServerForFile(opts: LocalServerOptions = {}): LocalServer {
  const server = {} as LocalServer;
  let stop = async () => {};
  beforeAll(async () => {
    if (opts.skip) return;
    const started = await startLocalServer(opts);
    stop = started.stop;
    Object.assign(server, started.server);
  }, 60_000);
  afterAll(() => stop(), 30_000);
  return server;
}

/** Start the server of `localServerForFile`; `stop` undoes everything it did. */
async function startLocalServer(
  opts: LocalServerOptions,
): Promise<{ server: LocalServer; stop(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'preview-it-'));
  const gitRoot = mkdtempSync(join(tmpdir(), 'preview-git-'));
  const workDir = opts.workDir === 'default' ? defaultWorkDir(dataDir) : join(dataDir, 'work');
  const env: Record<string, string | undefined> = {
    ...opts.env,
    PREVIEW_WORK_DIR: opts.workDir === 'default' ? undefined : workDir,
  };
  const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
  const setEnv = (values: Record<string, string | undefined>) => {
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
  const cleanUp = () => {
    for (const dir of [dataDir, gitRoot, workDir]) rmSync(dir, { recursive: true, force: true });
    setEnv(saved);
  };
  const logs: string[] = [];
  setLogSink((line) => logs.push(line));
  setEnv(env);
  let service: LocalService;
  try {
    service = await startLocal({ dataDir, port: 0, gitRoot });
  } catch (err) {
    cleanUp();
    throw err;
  }
  return {
    server: {
      service,
      url: service.url,
      dataDir,
      gitRoot,
      workDir,
      org: service.credentials,
      auth: bearer(service.credentials),
      logs,
      newOrg: (name = 'other') => createOrganization(name),
    },
    stop: async () => {
      try {
        await service.stop();
      } finally {
        cleanUp();
      }
    },
  };
}

/**
 * POST a deploy of `repo` pull request `pr` at `sha` as the first organization (its application linked
 * first; 202 expected). Returns the environment's status path.
 */
export async function requestDeploy(
  h: Pick<LocalServer, 'url' | 'org'>,
  repo: string,
  pr: number,
  sha: string,
): Promise<string> {
  await linkRepo(h.org, repo);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: pr, headSha: sha, headRef: 'feature' },
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  return `/v1/preview/environments/${repo}/${pr}`;
}
