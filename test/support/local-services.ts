import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keys } from '../../functions/manifest/tables.js';
import { sparesSettled } from '../../functions/ports/runtime/local/postgres-copy.js';
import { dropServices, ensureServices, socketDir } from '../../functions/ports/runtime/local/services.js';
import { type EnvState, envId, type LocalRuntime } from '../../functions/ports/runtime/local/state.js';
import type { RuntimeTarget } from '../../functions/ports/runtime/port.js';

/**
 * The local runtime's Postgres services driven directly, as a deploy drives them (`ensureServices`, in
 * this process, no sandbox network namespace): a scratch data dir and what `ensureServices` reads of the
 * runtime (its root, network mode and state). One service, `db`, postgres 15, per environment of
 * `repo`'s pull request `pr` (0: the main branch's). For the copy test and `npm run bench:services`.
 */
export function localPostgres(orgId: string, repo: string) {
  const root = mkdtempSync(join(tmpdir(), `${orgId}-services-`));
  const rt = { root, network: 'shared', state: { envs: {} } } as unknown as LocalRuntime;
  const target = (pr: number): RuntimeTarget => ({
    orgId,
    envKey: keys.environments.envKey(repo, pr),
    repoFullName: repo,
    prNumber: pr,
    generation: 1,
  });
  const envOf = (t: RuntimeTarget): EnvState => {
    rt.state.envs[envId(t)] ??= { fence: 1, apps: {}, buildPids: [] };
    return rt.state.envs[envId(t)]!;
  };
  return {
    root,
    rt,
    target,
    envOf,
    /** Create (or keep) the environment's `db`: empty, or `from: main`. */
    provide: (t: RuntimeTarget, from?: 'main', password = `pw-${t.prNumber}`) =>
      ensureServices(
        rt,
        t,
        envOf(t),
        [
          {
            name: 'db',
            spec: { kind: 'postgres', version: '15', seedApp: 'api', ...(from ? { from } : {}) },
            user: 'preview',
            password,
          },
        ],
        () => {},
      ),
    /** Stop and remove the environment's services with their data. */
    drop: (t: RuntimeTarget) => dropServices(rt, envId(t), envOf(t)),
    /** Where the environment's `db` is reached over its socket (as its superuser, trusted). */
    where: (t: RuntimeTarget) => ({
      sock: socketDir(root, envId(t), 'db'),
      port: envOf(t).services!.db!.port,
    }),
    /** Once no spare is being made: every service stopped, the data dir gone. */
    close: async () => {
      await sparesSettled();
      for (const id of Object.keys(rt.state.envs)) await dropServices(rt, id, rt.state.envs[id]!);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
