import { listEnvironments } from '../../core/environments/index.js';
import { latestGate } from '../../core/gate/index.js';
import { keys } from '../../manifest/tables.js';
import { route } from '../route.js';

/** How many environments' gates are read at once. */
const GATE_READS = 8;

/**
 * GET /v1/preview/environments: every environment of the caller's organization (additive; the spec has
 * no listing), as PreviewStatus objects, most recently updated first, each pull request's with its
 * merge gate (`gate`, as GET of one environment). What the dashboard polls.
 */
export const { main, handler } = route('listEnvironments', {}, async (req) => {
  const list = await listEnvironments(req.principal.orgId);
  list.sort((a, b) => (b.updatedAt ?? '').localeCompare(a.updatedAt ?? ''));
  const environments: ((typeof list)[number] & { gate?: unknown })[] = [];
  for (let i = 0; i < list.length; i += GATE_READS)
    environments.push(
      ...(await Promise.all(
        list.slice(i, i + GATE_READS).map(async (env) => {
          if (env.prNumber <= 0) return env;
          const gate = await latestGate({
            orgId: req.principal.orgId,
            envKey: keys.environments.envKey(env.repoFullName, env.prNumber),
          });
          return gate ? { ...env, gate } : env;
        }),
      )),
    );
  return { statusCode: 200, body: { environments } };
});
