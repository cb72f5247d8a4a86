import { closeSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { newId } from '../../../shared/crypto.js';
import { log } from '../../../shared/log.js';
import { DeployFailed } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { failureMessage } from '../log-cause.js';
import type { AppSpec, BuildOptions, BuildResult, RuntimeTarget } from '../port.js';
import { copyTree, findBuild, findRebuilt, keepBuild, keepRebuilt, localIdentity } from './build-cache.js';
import { drainedOrLater, logEnd, logTail, openLog, secretsOf } from './logs.js';
import {
  type ActiveBuild,
  type BuildRecord,
  envId,
  failure,
  type LocalRuntime,
  locked,
  netnsPath,
  save,
} from './state.js';
import { exitOf, groupGone, killGroup, limitFailure, OWNER_VAR, spawnCommand } from './supervision.js';
import { removeTree, scrub, workDir } from './working-copies.js';

/*
 * Builds: per app, a working copy of the SHA checked out from the source host and the app's `build` run
 * in it (its output in `<app>.build.log`), or, where an earlier build of the app had the same identity,
 * a copy of that build's output (build-cache.ts); the builds in progress, cancelled when a newer generation or a
 * teardown arrives, and the processes they run, recorded so that recovery can kill what a crash orphaned.
 */

/**
 * Check out and build every app of `apps`, or copy the kept output of an earlier build with the same
 * identity (unless `rebuild`); the outcome ends the build's callback task, its output saying which apps
 * were built and which reused (`builds`). On success each app's build record points at its new working
 * copy; on failure or cancellation the copies are removed.
 */
export async function runBuild(
  rt: LocalRuntime,
  target: RuntimeTarget,
  sha: string,
  apps: Record<string, AppSpec>,
  active: ActiveBuild,
  opts: Pick<BuildOptions, 'rebuild' | 'inputs'> = {},
): Promise<TaskOutcome> {
  const id = envId(target);
  const work = workDir(rt, target);
  const made: Record<string, BuildRecord> = {};
  const outcomes: Record<string, BuildResult> = {};
  /**
   * Copy a kept build output into `dir`: the environment's own rebuilt one at this identity, else the
   * shared one; a cancel waits for the copy like for a checkout.
   */
  const reuse = async (name: string, dir: string, identity: string): Promise<'rebuilt' | 'kept' | false> => {
    const rebuilt = await findRebuilt(rt, target, name, identity);
    const kept = rebuilt ?? (await findBuild(rt, target, name, identity));
    if (!kept || active.cancelled) return false;
    const copy = copyTree(kept.tree, dir);
    const settled = copy.then(
      () => undefined,
      () => undefined,
    );
    active.checkouts.add(settled);
    try {
      await copy;
    } catch (err) {
      // A kept output that cannot be copied (removed meanwhile): build instead, from a clean directory.
      removeTree(dir);
      if (active.cancelled) return 'kept';
      log.warn('could not reuse a build', { app: name, error: (err as Error).message });
      return false;
    } finally {
      active.checkouts.delete(settled);
    }
    outcomes[name] = { result: 'reused', commit: kept.commit };
    return rebuilt ? 'rebuilt' : 'kept';
  };
  const buildOne = async (name: string, spec: AppSpec) => {
    /**
     * Built: kept for reuse by identity, or, forced, as the asking environment's own rebuilt output (its
     * later whole deploys at this identity take it; no other environment does).
     */
    const built = async () => {
      outcomes[name] = { result: 'built', commit: sha.toLowerCase() };
      if (active.cancelled) return;
      if (opts.rebuild) await keepRebuilt(rt, target, name, identity, dir, sha.toLowerCase());
      else await keepBuild(rt, target, name, identity, dir, sha.toLowerCase());
    };
    // Cancelled before it began (a teardown got in first): nothing is created, nothing to wait for. From
    // here to the checkout's start nothing awaits, so a cancel sees either this or the checkout.
    if (active.cancelled) return;
    const buildId = newId();
    const dir = join(work, `${name}-${buildId}`);
    made[name] = { buildId, dir, sha, generation: target.generation };
    mkdirSync(work, { recursive: true });
    const what = `build ${sha.slice(0, 12)} (generation ${target.generation})`;
    // A marker in the app's log; the build's output goes to its own file, rewritten per build.
    closeSync(openLog(rt, target, name, `${what}: output in ${name}.build.log`));
    const identity = localIdentity(spec, sha.toLowerCase(), opts.inputs?.[name]);
    const reused = opts.rebuild ? false : await reuse(name, dir, identity);
    if (reused) {
      const whose = reused === 'rebuilt' ? "this environment's rebuild" : 'the build';
      closeSync(
        openLog(
          rt,
          target,
          name,
          `${what}: reused ${whose} of ${outcomes[name]?.commit.slice(0, 12)} (same inputs)`,
        ),
      );
      return;
    }
    if (active.cancelled) return;
    const logFile = openLog(rt, target, name, what, 'build');
    const checkout = rt.opts.sourceHost.checkout(target.repoFullName, sha, dir, {
      signal: active.abort.signal,
    });
    const settled = checkout.then(
      () => undefined,
      () => undefined,
    );
    active.checkouts.add(settled);
    let checkedOut = false;
    try {
      await checkout;
      checkedOut = true;
    } catch (err) {
      if (active.cancelled) return;
      throw new DeployFailed(
        `app ${name}: checkout of ${sha.slice(0, 12)} failed: ${(err as Error).message}`,
      );
    } finally {
      active.checkouts.delete(settled);
      if (!checkedOut || !spec.build || active.cancelled) closeSync(logFile);
    }
    if (!spec.build || active.cancelled) return built();
    // A build gets no secret bundle; the values its app last ran with are masked in its log anyway.
    const { child, drained, cgroups } = spawnCommand(
      rt,
      spec.build,
      dir,
      logFile,
      { build: true },
      {
        ...spec.env,
        ...spec.buildArgs, // the build arguments, as Docker gives them to a build: its environment
        [OWNER_VAR]: `${id}/${name}`,
      },
      secretsOf(rt, id, name),
      rt.network === 'namespace' ? netnsPath(rt, id) : undefined,
    );
    active.children.add(child);
    if (cgroups && child.pid !== undefined) rt.diskWatch.add(child.pid, dir);
    trackBuildPid(rt, id, child.pid, true);
    const result = await exitOf(child);
    await drainedOrLater(drained);
    const hit = rt.overDisk.delete(child.pid ?? -1) ? 'disk' : cgroups?.hit();
    if (child.pid !== undefined) rt.diskWatch.delete(child.pid);
    killGroup(child.pid, 'SIGKILL'); // nothing of a build outlives it (and its cgroups can go)
    cgroups?.remove();
    active.children.delete(child);
    trackBuildPid(rt, id, child.pid, false);
    if (active.cancelled) return;
    if (result !== 'exit code 0') {
      const who = `app ${name}: build \`${spec.build}\``;
      const limit = limitFailure(rt, who, hit, result, logEnd(rt, target, name, 'build'));
      throw new DeployFailed(
        failureMessage(
          limit ? `${limit} and failed (${result})` : `${who} failed (${result})`,
          limit ? '' : logEnd(rt, target, name, 'build'),
          logTail(rt, target, name, 'build'),
          { target, app: name, source: 'build' },
        ),
      );
    }
    return built();
  };
  const results = await Promise.allSettled(Object.entries(apps).map(([n, s]) => buildOne(n, s)));
  const discard = () => {
    for (const b of Object.values(made)) {
      try {
        removeTree(b.dir);
      } catch {
        // Logged; a teardown or the next recovery removes what is left. The token must still end.
      }
    }
  };
  if (active.cancelled || rt.stopping) {
    forget(rt, id, active);
    discard();
    return failure('Superseded', 'a newer build or a teardown replaced this one');
  }
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    forget(rt, id, active);
    discard();
    const err = failed.reason as Error;
    return failure('DeployFailed', scrub(rt, err.message));
  }
  return locked(rt, id, async () => {
    const env = rt.state.envs[id];
    forget(rt, id, active);
    if (!env || target.generation < env.fence || active.cancelled) {
      discard();
      return failure('Superseded', 'a newer build or a teardown replaced this one');
    }
    for (const [name, record] of Object.entries(made)) {
      env.apps[name] ??= {};
      const app = env.apps[name];
      const previous = app.build;
      app.build = record;
      // The old working copy goes unless the running process still runs from it.
      if (previous && previous.buildId !== app.running?.buildId)
        rmSync(previous.dir, { recursive: true, force: true });
    }
    save(rt);
    return { ok: true as const, output: { builds: outcomes } };
  });
}

/**
 * Cancel a build: abort its checkouts and kill its processes; resolves once all of them have exited
 * (so the caller may remove the working copies: nothing writes there any more).
 */
export function cancel(build: ActiveBuild): Promise<unknown> {
  build.cancelled = true;
  build.abort.abort();
  for (const child of build.children) killGroup(child.pid, 'SIGKILL');
  const stopped = [...build.children].map((child) => exitOf(child).then(() => groupGone(child.pid)));
  return Promise.all([...stopped, ...build.checkouts]);
}

/** Cancel an environment's builds in progress and drop them from the table; resolves once they have stopped. */
export async function cancelBuilds(rt: LocalRuntime, id: string): Promise<void> {
  const builds = [...(rt.builds.get(id)?.values() ?? [])];
  rt.builds.delete(id);
  await Promise.all(builds.map((b) => cancel(b)));
}

/** Drop a finished build from the in-progress table (where a newer one has not replaced it already). */
function forget(rt: LocalRuntime, id: string, active: ActiveBuild) {
  const builds = rt.builds.get(id);
  if (!builds) return;
  for (const [name, build] of builds) if (build === active) builds.delete(name);
  if (builds.size === 0) rt.builds.delete(id);
}

function trackBuildPid(rt: LocalRuntime, id: string, pid: number | undefined, add: boolean) {
  const env = rt.state.envs[id];
  if (!env || pid === undefined) return;
  env.buildPids = add ? [...env.buildPids, pid] : env.buildPids.filter((p) => p !== pid);
  save(rt);
}
