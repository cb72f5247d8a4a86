/**
 * The `AppTeardown` role on the cluster (eks/cluster.ts has the story): a failed environment's apps
 * stopped, an environment's namespace removed behind a teardown fence, and the fences nothing needs any
 * more pruned. What MarkFailed, TearDown and the expiry sweep get from the registry, so their bundles
 * carry the connection and the fences, not the deploy, the rollout watch or the Lambda invoker.
 */
import { log } from '../../../shared/log.js';
import { TransientError } from '../../../shared/step-errors.js';
import type { AppTeardown, RuntimeTarget } from '../port.js';
import { isCode } from './client.js';
import { type EksConnection, sleep, terminating } from './connection.js';
import { KEDA_DEFAULTS, referenceGrantName } from './door/scale-to-zero.js';
import { annotateGeneration, explain, refuseForeign, removeFence, superseded, writeFence } from './fences.js';
import { EksLogs } from './logs.js';
import { appSelector, fenceName, generationOf, LABELS, MANAGED_BY, namespaceName } from './objects.js';
import { serviceStatuses } from './services/setup.js';

export class EksTeardown implements AppTeardown {
  constructor(private readonly conn: EksConnection) {}

  /**
   * Write the fence, delete the namespace with foreground propagation and wait (bounded, `teardownWaitMs`)
   * until it is gone; still there then, throw `TransientError` (the state machine retries, and the retry
   * waits again), so the environment becomes torn_down only once the namespace is gone.
   */
  async teardown(target: RuntimeTarget): Promise<void> {
    const conn = this.conn;
    const name = namespaceName(target);
    const gen = target.generation;
    try {
      for (let attempt = 0; ; attempt++) {
        if (attempt > 5) throw new TransientError(`namespace ${name} kept changing under this teardown`);
        const ns = await conn.readOrNull('namespaces', '', name);
        if (ns) refuseForeign(ns);
        const current = generationOf(ns);
        if (ns && current > gen) throw superseded(name, current, gen);
        await writeFence(conn, target);
        if (!ns) break;
        if (!terminating(ns) && current < gen) {
          try {
            await annotateGeneration(conn, ns, gen);
          } catch (err) {
            if (isCode(err, 409)) continue;
            if (!isCode(err, 404)) throw err;
          }
        }
        try {
          await conn.call(`delete Namespace ${name}`, (k) =>
            k.namespaces.remove('', name, { propagationPolicy: 'Foreground' }),
          );
        } catch (err) {
          // 404: already gone; 409: already terminating.
          if (!isCode(err, 404) && !isCode(err, 409)) throw err;
        }
        break;
      }
      await this.waitGone(name);
      // The one object a preview owns outside its namespace: the interceptor's ReferenceGrant (sleeping).
      await conn.removeObject(
        'referenceGrants',
        conn.opts.keda?.namespace ?? KEDA_DEFAULTS.namespace,
        referenceGrantName(name),
      );
      log.info('namespace removed', { namespace: name, generation: gen });
    } catch (err) {
      throw await explain(conn, err, target, []);
    }
  }

  /**
   * Stop the environment's apps (a failed environment keeps nothing running): delete their Deployments,
   * fenced like every write (one a newer generation wrote is Superseded), keeping their Services,
   * Ingresses and Secrets; the next deploy or restart creates them again (eks/apps.ts `applyApp`). Each
   * app's output is kept first (eks/logs.ts `keepOutput`: its pods and their logs go with the
   * Deployment), so the logs route answers a crashed app's last lines after the failure. No namespace
   * (or one being removed): nothing runs, nothing to stop.
   */
  /** The services whose Cluster, Deployment or seed failed (eks/services/setup.ts `serviceStatuses`). */
  async failedServices(target: RuntimeTarget): Promise<string[]> {
    const states = await serviceStatuses(this.conn, target);
    return Object.keys(states).filter((name) => states[name] === 'failed');
  }

  async stopApps(target: RuntimeTarget, reason: string): Promise<Record<string, string>> {
    const conn = this.conn;
    const name = namespaceName(target);
    const gen = target.generation;
    const stopped: Record<string, string> = {};
    try {
      const ns = await conn.readOrNull('namespaces', '', name);
      if (!ns || terminating(ns)) return stopped;
      refuseForeign(ns);
      if (generationOf(ns) > gen) throw superseded(name, generationOf(ns), gen);
      const list = () =>
        conn.call(`list deployments in ${name}`, (k) => k.deployments.list(name, appSelector));
      // Each app's output first, then the Deployments as they are now (their status moved meanwhile).
      const logs = new EksLogs(conn);
      for (const item of await list()) {
        const app = item.metadata?.labels?.[LABELS.app];
        if (app && generationOf(item) <= gen) await logs.keepOutput(target, app);
      }
      const items = await list();
      for (const item of items) {
        const app = item.metadata?.labels?.[LABELS.app];
        const object = item.metadata?.name;
        if (!app || !object) continue;
        const current = generationOf(item);
        if (current > gen) throw superseded(`${name}/${object}`, current, gen);
        try {
          await conn.call(`delete deployments ${name}/${object}`, (k) =>
            k.deployments.remove(name, object, { resourceVersion: item.metadata?.resourceVersion }),
          );
        } catch (err) {
          if (!isCode(err, 404)) throw err;
        }
        stopped[app] = `stopped: ${reason}`;
      }
    } catch (err) {
      throw await explain(conn, err, target, []);
    }
    log.info('apps stopped', { namespace: name, generation: gen, apps: Object.keys(stopped).join(',') });
    return stopped;
  }

  /**
   * Remove the teardown fences nothing needs any more: a fence whose namespace is gone and that was
   * written before `before` (the caller's cutoff: older than any call of a generation it fences can
   * arrive, core/expiry.ts `FENCE_RETENTION_MS`). A namespace that exists is left with its fence (a
   * teardown may be deleting it; a newer generation that re-created it removes the fence itself, eks/
   * apps.ts `ensureNamespace`). Each delete requires the fence's resourceVersion as read, so a teardown
   * that rewrote it meanwhile keeps it. No system namespace yet: nothing to remove.
   */
  async pruneFences(before: Date): Promise<{ removed: number }> {
    const conn = this.conn;
    const sys = conn.systemNamespace;
    let removed = 0;
    try {
      const fences = await conn.call(`list ConfigMaps ${sys}`, (k) =>
        k.configMaps.list(sys, `${LABELS.managedBy}=${MANAGED_BY}`),
      );
      for (const fence of fences) {
        const name = fence.metadata?.name ?? '';
        if (!name.startsWith(fenceName(''))) continue;
        const written = Date.parse(fence.data?.tornDownAt ?? String(fence.metadata?.creationTimestamp ?? ''));
        if (Number.isNaN(written) || written >= before.getTime()) continue;
        const namespace = fence.data?.namespace ?? name.slice(fenceName('').length);
        if (await conn.readOrNull('namespaces', '', namespace)) continue;
        if (await removeFence(conn, fence)) removed++;
      }
    } catch (err) {
      // No system namespace: no fence was ever written.
      if (isCode(err, 404)) return { removed };
      throw err;
    }
    if (removed > 0) log.info('teardown fences removed', { removed, before: before.toISOString() });
    return { removed };
  }

  private async waitGone(name: string): Promise<void> {
    const { timing } = this.conn;
    const until = Date.now() + timing.teardownWaitMs;
    for (;;) {
      const ns = await this.conn.readOrNull('namespaces', '', name);
      if (!ns) return;
      if (Date.now() >= until)
        throw new TransientError(
          `namespace ${name} is still terminating after ${Math.round(timing.teardownWaitMs / 1000)} s ` +
            `(a finalizer may hold it: kubectl get namespace ${name} -o yaml); the teardown will be retried`,
        );
      await sleep(Math.min(1000, timing.pollMs));
    }
  }
}
