import { beforeAll, expect } from '@jest/globals';
import { call, client } from './api.js';
import { deployFactoryApp, type FactoryApp } from './factory-app.js';
import type { LocalServer } from './local-server.js';
import { deployRunsApp, type RunsApp } from './runs-app.js';

/*
 * The run tests' fixtures, layered on the file's one local server (`localServerForFile`): the fixture
 * apps deployed on it before the file's tests, and a run started. The deploys themselves live in
 * runs-app.ts and factory-app.ts, importable outside Jest (the benchmarks use the runs fixture app).
 */

/**
 * What `setUp` returns, for a test file: set up before its tests (after the server's start, and before
 * the hooks the file registers after this call). Filled in when the file's tests start: read it in hooks
 * and tests, not while the file loads.
 */
function setUpForFile<T extends object>(setUp: () => Promise<T>, timeoutMs: number): T {
  const fixture = {} as T;
  beforeAll(async () => {
    Object.assign(fixture, await setUp());
  }, timeoutMs);
  return fixture;
}

/** The runs fixture app (runs-app.ts) deployed on `server` as an application's main branch, ready. */
export function runsAppForFile(server: LocalServer, opts: Parameters<typeof deployRunsApp>[1] = {}): RunsApp {
  return setUpForFile(() => deployRunsApp(server, opts), 120_000);
}

/** The fixture web and factory apps (factory-app.ts) deployed on `server` as a main branch, ready. */
export function factoryAppForFile(server: LocalServer, repo?: string): FactoryApp {
  return setUpForFile(() => deployFactoryApp(server, repo), 180_000);
}

/** Start a run of `testId` as the server's first organization (`body`: the run's options); 201 expected. */
export async function startRun(
  server: Pick<LocalServer, 'url' | 'org'>,
  testId: string,
  body?: unknown,
): Promise<{ run_id: string; url: string }> {
  const res = await call(server, 'POST', `/test/${testId}/run`, { headers: client(server.org), body });
  expect(res.status).toBe(201);
  return res.body;
}
