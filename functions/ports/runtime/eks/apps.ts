/**
 * The deploy half of the `AppRunner` role on the cluster (eks/cluster.ts has the story; the other half,
 * the readiness wait, is eks/rollout-watch.ts): the environment's namespace at the target's generation,
 * then per app its Secret, Deployment and Service, its way in through the front door (eks/front-door.ts
 * `EksFrontDoor`), and the namespace's ResourceQuota and NetworkPolicy; a restart only rolls the pods;
 * a whole-environment deploy prunes apps no longer declared. preview.yaml services (eks/services/) come
 * first: made sure of, their URLs resolved into the apps' env, and the migrate and seed Jobs planned, the
 * apps then written held (0 replicas) for the rollout watcher to run the Jobs and let them start.
 */
import { log } from '../../../shared/log.js';
import { Superseded, TransientError } from '../../../shared/step-errors.js';
import { type AppAddress, resolveAppRefs } from '../app-refs.js';
import type { AppLaunch, DeployOptions, FrontDoorSettings, RuntimeTarget } from '../port.js';
import { isCode } from './client.js';
import { type EksConnection, type Kind, sleep, terminating } from './connection.js';
import { EksFrontDoor } from './door/front-door.js';
import {
  annotateGeneration,
  applyFenced,
  explain,
  fenceGeneration,
  fenceOf,
  refuseForeign,
  removeFence,
  superseded,
} from './fences.js';
import {
  ANNOTATIONS,
  appSelector,
  deploymentObject,
  generationOf,
  internalUrl,
  LABELS,
  NETWORK_POLICY_NAME,
  namespaceName,
  namespaceObject,
  networkPolicyObject,
  objectName,
  publicUrl,
  QUOTA_NAME,
  quotaObject,
  restartRollout,
  secretObject,
  secretVars,
  secretVersionOf,
  serviceObject,
  specHashOf,
} from './objects.js';
import { EksServices } from './services/services.js';

/** What a whole-environment deploy prunes of apps no longer declared, the way in first, in this order. */
const PRUNED_KINDS = [
  'securityPolicies',
  'httpRoutes',
  'ingresses',
  'scaledObjects',
  'interceptorRoutes',
  'httpScaledObjects',
  'services',
  'deployments',
  'secrets',
] as const satisfies readonly Kind[];

export class EksApps {
  private readonly door: EksFrontDoor;

  constructor(private readonly conn: EksConnection) {
    this.door = new EksFrontDoor(conn);
  }

  /**
   * Apply, per app, its Secret, Deployment, Service and way in (create, or replace when what was written
   * differs: the same content is not rewritten, so an unchanged app does not roll); plus the namespace's
   * ResourceQuota and NetworkPolicy. Only the apps passed are touched; `prune` deletes the objects of
   * apps no longer passed. With `restart`, an app's Secret is re-synced and only its pod template patched.
   */
  async deploy(target: RuntimeTarget, launches: AppLaunch[], opts: DeployOptions = {}): Promise<void> {
    const { conn } = this;
    const services = opts.services ?? [];
    const ns = namespaceName(target);
    const gen = target.generation;
    const addresses: Record<string, AppAddress> = {};
    for (const name of opts.apps ?? launches.map((a) => a.name))
      addresses[name] = {
        url: publicUrl(ns, name, conn.opts.domain),
        internalUrl: internalUrl(target, name),
      };
    const svc = new EksServices(conn, conn.opts.services);
    const resolved = svc.resolve(
      ns,
      launches.map((a) => resolveAppRefs(a, addresses)),
      services,
    );
    const apps = resolved.apps;
    const secrets = [
      ...apps.flatMap((a) => Object.values(secretVars(a))),
      ...services.map((s) => s.password),
    ];
    try {
      // Refused before anything is written: protection that can't be enforced, an engine not installed.
      await this.door.check(ns, opts.frontDoor);
      await svc.check(ns, services);
      await this.ensureNamespace(target);
      await applyFenced(conn, 'quotas', ns, QUOTA_NAME, gen, () => quotaObject(ns, gen, conn.opts));
      const door = opts.frontDoor;
      await applyFenced(conn, 'networkPolicies', ns, NETWORK_POLICY_NAME, gen, () =>
        networkPolicyObject(ns, gen, conn.opts, [...this.door.admitted(door), ...svc.admitted(services)]),
      );
      await this.door.prepare(ns, gen, door);
      // The services (created on first use, those no longer declared removed), then the Jobs this deploy
      // needs: with any, the apps are held (0 replicas) until the rollout watcher has run them.
      if (services.length || opts.prune) await svc.ensure(target, services);
      const plan = await svc.plan(target, apps, services, (app) => {
        const c = deploymentObject(ns, app, '', gen, conn.opts, undefined, { env: resolved.env[app.name] })
          .spec!.template.spec!.containers[0]!;
        return { image: c.image!, env: c.env ?? [], secretName: objectName(app.name) };
      });
      const held = new Set(plan.held);
      await Promise.all(
        apps.map(async (app) => {
          const secretVersion = await this.syncSecret(ns, app, gen);
          const extra = { env: resolved.env[app.name], ...(held.has(app.name) ? { replicas: 0 } : {}) };
          // A restart of an app with no Deployment yet creates it whole (and a held one is written whole).
          if (opts.restart && !held.has(app.name) && (await this.restartApp(ns, app, gen, secretVersion)))
            return;
          await this.applyApp(ns, app, gen, secretVersion, target, door, extra);
        }),
      );
      if (opts.prune) await this.prune(ns, new Set(apps.map((a) => a.name)), gen);
      log.info('deployed to the cluster', {
        namespace: ns,
        generation: gen,
        apps: apps.map((a) => a.name).join(','),
        mode: opts.restart ? 'restart' : 'apply',
        prune: Boolean(opts.prune),
      });
    } catch (err) {
      throw await explain(conn, err, target, secrets);
    }
  }

  /**
   * The namespace, at the target's generation: created (unless a teardown's fence is as new), or its
   * annotation bumped (compare-and-set). An older target is Superseded; a namespace still being deleted
   * is waited for, briefly.
   */
  private async ensureNamespace(target: RuntimeTarget): Promise<void> {
    const { conn } = this;
    const name = namespaceName(target);
    const gen = target.generation;
    const waitUntil = Date.now() + conn.timing.namespaceWaitMs;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 20) throw new TransientError(`namespace ${name} kept changing under this deploy`);
      const ns = await conn.readOrNull('namespaces', '', name);
      if (ns) {
        refuseForeign(ns);
        const current = generationOf(ns);
        if (current > gen) throw superseded(name, current, gen);
        if (terminating(ns)) {
          if (Date.now() >= waitUntil)
            throw new TransientError(`namespace ${name} is still being deleted by a teardown; retry`);
          await sleep(Math.min(1000, conn.timing.pollMs));
          continue;
        }
        if (current === gen) return;
        try {
          await annotateGeneration(conn, ns, gen);
          return;
        } catch (err) {
          if (isCode(err, 409)) continue;
          throw err;
        }
      }
      const fence = await fenceGeneration(conn, name);
      if (fence >= gen) throw new Superseded(`${name} was torn down at generation ${fence}; this is ${gen}`);
      try {
        await conn.call(`create Namespace ${name}`, (k) => k.namespaces.create('', namespaceObject(target)));
      } catch (err) {
        if (isCode(err, 409)) continue;
        throw err;
      }
      // A teardown may have fenced between the check and the create: it wins, and the namespace goes.
      const latest = await fenceOf(conn, name);
      const after = generationOf(latest);
      if (after >= gen) {
        await conn
          .call(`delete Namespace ${name}`, (k) =>
            k.namespaces.remove('', name, { propagationPolicy: 'Foreground' }),
          )
          .catch(() => undefined);
        throw new Superseded(`${name} was torn down at generation ${after}; this is ${gen}`);
      }
      // The namespace fences older generations from now on (its annotation, and the next teardown's
      // fence): an older teardown's fence is stale. Removed only as read (a teardown rewriting it wins);
      // left for the expiry sweep when that fails.
      if (latest)
        await removeFence(conn, latest).catch((err) =>
          log.warn('stale teardown fence left for the sweep', {
            namespace: name,
            error: (err as Error).message,
          }),
        );
      return;
    }
  }

  /** Write the app's Secret (what every deploy and restart does first); returns its version. */
  private async syncSecret(ns: string, app: AppLaunch, gen: number): Promise<string> {
    const secret = await applyFenced(this.conn, 'secrets', ns, objectName(app.name), gen, (existing) =>
      secretObject(ns, app, gen, existing),
    );
    return secretVersionOf(secret);
  }

  /** Write the app's Deployment (at `secretVersion`, its Secret's), Service, and its way in. */
  private async applyApp(
    ns: string,
    app: AppLaunch,
    gen: number,
    secretVersion: string,
    target: RuntimeTarget,
    door: FrontDoorSettings | undefined,
    extra: Parameters<typeof deploymentObject>[6],
  ): Promise<void> {
    const { conn } = this;
    const name = objectName(app.name);
    await applyFenced(conn, 'deployments', ns, name, gen, (existing) =>
      deploymentObject(ns, app, secretVersion, gen, conn.opts, existing, extra),
    );
    await applyFenced(conn, 'services', ns, name, gen, (existing) => {
      const service = serviceObject(ns, app, gen);
      // The allocated cluster IP stays (it is immutable; not part of what was written, so not hashed).
      if (existing?.spec?.clusterIP) {
        service.spec!.clusterIP = existing.spec.clusterIP;
        if (existing.spec.clusterIPs) service.spec!.clusterIPs = existing.spec.clusterIPs;
      }
      return service;
    });
    await this.door.applyTo(ns, app, gen, target, door);
  }

  /**
   * Roll the app's pods (its Secret synced, at `secretVersion`): a merge patch of its pod template,
   * nothing else. @returns false when the app has no Deployment to restart (the caller applies it whole)
   */
  private async restartApp(ns: string, app: AppLaunch, gen: number, secretVersion: string): Promise<boolean> {
    const { conn } = this;
    const name = objectName(app.name);
    for (let attempt = 0; attempt < 5; attempt++) {
      const deployment = await conn.readOrNull('deployments', ns, name);
      if (!deployment) return false;
      const current = generationOf(deployment);
      if (current > gen) throw superseded(`${ns}/${name}`, current, gen);
      const restartedAt = new Date().toISOString();
      try {
        await conn.call(`restart Deployment ${ns}/${name}`, (k) =>
          k.deployments.patch(ns, name, {
            metadata: {
              resourceVersion: deployment.metadata?.resourceVersion,
              annotations: { [ANNOTATIONS.generation]: String(gen) },
            },
            spec: {
              template: {
                metadata: {
                  labels: { [LABELS.rollout]: restartRollout(specHashOf(deployment), restartedAt) },
                  annotations: {
                    [ANNOTATIONS.restartedAt]: restartedAt,
                    [ANNOTATIONS.secretVersion]: secretVersion,
                  },
                },
              },
            },
          }),
        );
        return true;
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
    }
    throw new TransientError(`Deployment ${ns}/${name} kept changing under this restart`);
  }

  /** Delete the objects of apps not in `keep` (PRUNED_KINDS, in that order). */
  private async prune(ns: string, keep: Set<string>, gen: number): Promise<void> {
    const { conn } = this;
    for (const kind of PRUNED_KINDS) {
      // A kind whose engine the cluster lacks lists as none (eks/engines.ts): nothing of it to prune.
      const items = await conn.listOptional(kind, ns, appSelector);
      for (const item of items) {
        const app = item.metadata?.labels?.[LABELS.app];
        const name = item.metadata?.name;
        if (!app || !name || keep.has(app)) continue;
        const current = generationOf(item);
        if (current > gen) throw superseded(`${ns}/${name}`, current, gen);
        await conn.removeObject(kind, ns, name, item.metadata?.resourceVersion);
      }
    }
  }
}
