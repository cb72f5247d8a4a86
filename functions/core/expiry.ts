import type { Workflows } from '../ports/workflows/port.js';
import { log } from '../shared/log.js';
import {
  type Environment,
  type EnvRef,
  findEnvironment,
  liveEnvironments,
  requestTeardown,
} from './environments.js';
import { type Application, DEFAULT_TTL_HOURS, findApplicationByRepo } from './tenancy.js';

const HOUR = 3600_000;

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
 * than its application's ttl without a deploy.
 * Steps: walk the environments not torn down (the `byStatus` index, every organization); for each settled
 * PR environment, its application's ttl (one lookup per organization and repository); when past it, read
 * the environment again (a deploy may just have come in) and, still expired, request its teardown (the
 * API's use case: a newer generation, the teardown state machine, `inactive` on the PR).
 */
export async function sweepExpired(
  deps: { workflows: Workflows },
  now: Date = new Date(),
): Promise<{ checked: number; expired: EnvRef[] }> {
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
  let checked = 0;
  for await (const env of liveEnvironments()) {
    checked++;
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
  return { checked, expired };
}
