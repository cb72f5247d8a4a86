import type { AppTeardown } from '../../ports/runtime/port.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { log } from '../../shared/log.js';
import { type Application, DEFAULT_TTL_HOURS, findApplicationByRepo } from '../applications/index.js';
import { findEnvironment, liveEnvironments, requestTeardown, resumeEnvironment } from './lifecycle.js';
import type { Environment, EnvRef } from './types.js';

const HOUR = 3600_000;
const MINUTE = 60_000;

/** How long a requested deploy may stay `pending` before the sweep starts its state machine again. */
export const STRANDED_DEPLOY_MS = 10 * MINUTE;
/**
 * How long a requested teardown may go without an outcome before the sweep starts it again: longer than
 * the TearDown task can take with its retries (4 attempts of at most 300 s, statemachines/teardown.asl.json).
 */
export const STRANDED_TEARDOWN_MS = 30 * MINUTE;

/**
 * How long a teardown's fence is kept once its environment's namespace is gone (`sweepFences`). A fence
 * refuses calls of the generations before its teardown; such a call comes from an execution started
 * before the teardown was requested (a generation is bumped before its execution starts, and the expiry
 * sweep that restarts stranded work starts it within its own 5-minute run). The state machines set no
 * overall timeout, so the longest an execution can run is the sum over its states of every attempt
 * timing out (MaxAttempts + 1 times TimeoutSeconds) and the retry backoff: about 8 hours for the deploy
 * and app-redeploy machines (BuildImages 5 x 1 h, DeployApps 5 x 30 min), half an hour for a teardown
 * (statemachines/*.asl.json; test/unit/fence-retention.test.ts recomputes it from the files and fails if
 * this is not above it). A day is three times that, and a fence is a few hundred bytes.
 */
export const FENCE_RETENTION_MS = 24 * HOUR;

/**
 * Remove the teardown fences that guard nothing any more (`Runtime.pruneFences`): those written longer
 * than `FENCE_RETENTION_MS` ago whose environment is gone. A failure is logged, not thrown: a fence left
 * is harmless, and the next sweep tries again (a 403 says the cluster's RBAC predates this: apply
 * deploy/rbac.yaml again).
 */
export async function sweepFences(
  deps: { runtime: Pick<AppTeardown, 'pruneFences'> },
  now: Date = new Date(),
): Promise<number> {
  try {
    return (await deps.runtime.pruneFences(new Date(now.getTime() - FENCE_RETENTION_MS))).removed;
  } catch (err) {
    log.error('teardown fences could not be pruned; the next sweep tries again', {
      error: (err as Error).name,
      reason: (err as Error).message,
    });
    return 0;
  }
}

/**
 * The work an environment is marked for that nothing is doing. A deploy or teardown request writes the
 * record first and starts its state machine after; when the start fails for good (Step Functions
 * unavailable past the client's retries and Lambda's, a function timing out between the two), the record
 * claims work in flight that never began, and nothing else would ever move it: expiry waits for a settled
 * environment, and an app redeploy for a settled one. `deploy`: still `pending` long after the request
 * (the first step of every deploy moves it to `building` within seconds); `teardown`: requested, and
 * neither torn down nor failed long after. Undefined otherwise.
 */
export function strandedWork(
  env: Pick<Environment, 'status' | 'tornDownRequested' | 'updatedAt'>,
  now: number,
): 'deploy' | 'teardown' | undefined {
  const since = Date.parse(env.updatedAt);
  if (Number.isNaN(since)) return undefined;
  if (env.tornDownRequested)
    return env.status !== 'torn_down' && env.status !== 'failed' && now - since > STRANDED_TEARDOWN_MS
      ? 'teardown'
      : undefined;
  return env.status === 'pending' && now - since > STRANDED_DEPLOY_MS ? 'deploy' : undefined;
}

/**
 * When an environment expires under a ttl (hours; 0 = never), or undefined when it never does: the
 * main-branch environment (0) never expires, and only a settled one (ready or failed) does: a deploy in
 * flight is not idle. The clock starts at the last whole-environment deploy (`lastDeployAt`; records
 * from before it was kept use their last change).
 */
export function expiryOf(
  env: Pick<Environment, 'prNumber' | 'status' | 'tornDownRequested' | 'lastDeployAt' | 'updatedAt'>,
  ttlHours: number,
): Date | undefined {
  if (env.prNumber === 0 || ttlHours <= 0 || env.tornDownRequested) return undefined;
  if (env.status !== 'ready' && env.status !== 'failed') return undefined;
  const from = Date.parse(env.lastDeployAt ?? env.updatedAt);
  if (Number.isNaN(from)) return undefined;
  return new Date(from + ttlHours * HOUR);
}

/** An application's ttl in hours (default 72; 0 = never). */
export const ttlHoursOf = (app: Pick<Application, 'ttlHours'> | undefined): number =>
  app?.ttlHours ?? DEFAULT_TTL_HOURS;

/**
 * The expiry sweep (a schedule in AWS, a timer locally): tear down every PR environment that went longer
 * than its application's ttl without a deploy, and start again the work of any environment stranded by a
 * failed start (`strandedWork`).
 * Steps: walk the environments not torn down (the `byStatus` index, every organization); for one whose
 * work is stranded, read it again (its state machine may just have moved it) and, still stranded, start
 * that work again at its generation (`resumeEnvironment`: a deploy, or the teardown; the steps are fenced
 * by generation, so a start that did happen after all is superseded, not doubled); for each settled PR
 * environment, its application's ttl (one lookup per organization and repository); when past it, read
 * the environment again (a deploy may just have come in) and, still expired, request its teardown (the
 * API's use case: a newer generation, the teardown state machine, `inactive` on the PR).
 */
export async function sweepExpired(
  deps: { workflows: Workflows },
  now: Date = new Date(),
): Promise<{ checked: number; expired: EnvRef[]; restarted: EnvRef[] }> {
  const ttls = new Map<string, Promise<number>>();
  const ttlFor = (env: Environment) => {
    const k = `${env.orgId}#${env.repoFullName.toLowerCase()}`;
    let t = ttls.get(k);
    if (!t) {
      t = findApplicationByRepo(env.orgId, env.repoFullName).then(ttlHoursOf);
      ttls.set(k, t);
    }
    return t;
  };
  const expired: EnvRef[] = [];
  const restarted: EnvRef[] = [];
  let checked = 0;
  for await (const env of liveEnvironments()) {
    checked++;
    const stranded = strandedWork(env, now.getTime());
    if (stranded) {
      const fresh = await findEnvironment(env.orgId, env.envKey);
      if (!fresh || strandedWork(fresh, now.getTime()) !== stranded) continue;
      await resumeEnvironment(deps.workflows, fresh);
      restarted.push({ orgId: env.orgId, repoFullName: env.repoFullName, prNumber: env.prNumber });
      log.warn('stranded environment: its work is started again', {
        orgId: env.orgId,
        envKey: env.envKey,
        work: stranded,
        generation: fresh.generation,
        since: fresh.updatedAt,
      });
      continue;
    }
    if (env.prNumber === 0 || (env.status !== 'ready' && env.status !== 'failed')) continue;
    const ttl = await ttlFor(env);
    const at = expiryOf(env, ttl);
    if (!at || at > now) continue;
    const fresh = await findEnvironment(env.orgId, env.envKey);
    const freshAt = fresh && expiryOf(fresh, ttl);
    if (!freshAt || freshAt > now) continue;
    const ref = { orgId: env.orgId, repoFullName: env.repoFullName, prNumber: env.prNumber };
    await requestTeardown(deps.workflows, ref);
    expired.push(ref);
    log.info('environment expired', {
      orgId: env.orgId,
      envKey: env.envKey,
      ttlHours: ttl,
      lastDeployAt: fresh.lastDeployAt ?? fresh.updatedAt,
    });
  }
  return { checked, expired, restarted };
}
