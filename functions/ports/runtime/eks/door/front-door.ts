/**
 * The front door of an environment on EKS: existing engines do the work, no proxy of ours runs in the
 * cluster (docs/deploy-to-aws.md "Routing", "Scale to zero", "Protection").
 * - The way in: per app an HTTPRoute on the operator's Gateway (door/gateway.ts; the default), or an
 *   Ingress of the operator's class (door/ingress.ts; an explicit choice, never protected).
 * - Sleep and wake: KEDA's HTTP add-on, an InterceptorRoute and a ScaledObject per app, the way in routed
 *   to the add-on's interceptor (door/scale-to-zero.ts).
 * - Protection: the verifier asked first, by Envoy Gateway's SecurityPolicy or the ExternalAuth filter
 *   (door/gateway.ts). Where the stack's setting is `none`, or the routing is Ingress, a protected preview
 *   is refused before anything is written (`check`): never silently public.
 * Each kind belongs to an optional engine (eks/engines.ts): `check` refuses a preview that needs a missing
 * one, naming it. What the door no longer wants goes on the next deploy: the other routing's objects,
 * sleep's objects once the app stays awake, protection's once public, and what earlier versions of this
 * service wrote (HTTPScaledObjects, the ingress-nginx access Ingresses, ExternalName stand-ins), so
 * nothing is left behind in the namespace. Every write fenced by generation (eks/fences.ts).
 */
import { protectionRefusal } from '../../../../shared/config.js';
import { DeployFailed } from '../../../../shared/step-errors.js';
import type { AppLaunch, FrontDoorSettings, RuntimeTarget } from '../../port.js';
import type { EksConnection, Kind } from '../connection.js';
import { applyFenced } from '../fences.js';
import { objectName } from '../objects.js';
import {
  guarded,
  httpRouteObject,
  securityPolicyObject,
  VERIFIER_BACKEND,
  verifierBackendObject,
  verifierServiceObject,
} from './gateway.js';
import { ingressWithDoor, LEGACY_ACCESS_INGRESS } from './ingress.js';
import {
  INTERCEPTOR_SERVICE,
  interceptorRouteObject,
  interceptorServiceObject,
  KEDA_DEFAULTS,
  kedaScaledObject,
  referenceGrantName,
  referenceGrantObject,
  sleeps,
} from './scale-to-zero.js';

export class EksFrontDoor {
  constructor(private readonly conn: EksConnection) {}

  private get gateway(): boolean {
    return this.conn.opts.routing !== 'ingress';
  }

  private get keda() {
    return this.conn.opts.keda;
  }

  /** Namespaces the NetworkPolicy admits besides the way in's: KEDA's, when the apps sleep. */
  admitted(door: FrontDoorSettings | undefined): string[] {
    return sleeps(door) ? [this.keda?.namespace ?? KEDA_DEFAULTS.namespace] : [];
  }

  /**
   * Refuse, before anything is written, a preview this cluster cannot serve: protected where protection
   * cannot be enforced, or needing an engine the cluster lacks (named, with how to install it).
   */
  async check(ns: string, door: FrontDoorSettings | undefined): Promise<void> {
    const { opts } = this.conn;
    if (door?.access === 'protected') {
      const refusal = protectionRefusal({
        clusterName: opts.clusterName,
        routing: opts.routing ?? 'gateway',
        protection: opts.protection ?? 'none',
      });
      if (refusal) throw new DeployFailed(`this preview is protected, but ${refusal}`);
      if (!opts.verifierUrl)
        throw new DeployFailed(
          'this preview is protected, but the stack set no verifier (ACCESS_VERIFIER_URL): it would answer anyone',
        );
    }
    if (this.gateway)
      await this.conn.requireKinds(['httpRoutes'], ns, "Gateway routing (the stack's routing setting)");
    if (sleeps(door))
      await this.conn.requireKinds(
        ['interceptorRoutes', 'scaledObjects', ...(this.gateway ? (['referenceGrants'] as Kind[]) : [])],
        ns,
        "sleeping (the application's sleepAfterMinutes)",
      );
    if (guarded(door, opts) && opts.protection === 'envoy-security-policy')
      await this.conn.requireKinds(
        ['securityPolicies', 'backends'],
        ns,
        'protection (envoy-security-policy)',
      );
  }

  /** The namespace's part of the door: the verifier's backend, the interceptor's grant or stand-in. */
  async prepare(ns: string, gen: number, door: FrontDoorSettings | undefined): Promise<void> {
    const { conn } = this;
    const { opts } = conn;
    const verifierUrl = opts.verifierUrl;
    const protect = guarded(door, opts) && verifierUrl ? opts.protection : undefined;
    if (protect === 'envoy-security-policy')
      await applyFenced(conn, 'backends', ns, VERIFIER_BACKEND, gen, () =>
        verifierBackendObject(ns, gen, verifierUrl!),
      );
    else if (door) await conn.removeObject('backends', ns, VERIFIER_BACKEND);
    if (protect === 'gateway-external-auth')
      await applyFenced(conn, 'services', ns, VERIFIER_BACKEND, gen, () =>
        verifierServiceObject(ns, gen, verifierUrl!),
      );
    else if (door) await conn.removeObject('services', ns, VERIFIER_BACKEND);
    const kedaNs = this.keda?.namespace ?? KEDA_DEFAULTS.namespace;
    if (sleeps(door) && this.gateway)
      await applyFenced(conn, 'referenceGrants', kedaNs, referenceGrantName(ns), gen, () =>
        referenceGrantObject(ns, gen, this.keda),
      );
    else if (door) await conn.removeObject('referenceGrants', kedaNs, referenceGrantName(ns));
    if (sleeps(door) && !this.gateway)
      await applyFenced(conn, 'services', ns, INTERCEPTOR_SERVICE, gen, () =>
        interceptorServiceObject(ns, gen, this.keda),
      );
    else if (door) await conn.removeObject('services', ns, INTERCEPTOR_SERVICE);
  }

  /**
   * One app's way in, once its Deployment and Service are written: sleeping, its InterceptorRoute and
   * ScaledObject before the way in routes to the interceptor; no longer sleeping, the way in back to the
   * Service, then they go. Then what this routing does not use, and what earlier versions wrote.
   */
  async applyTo(
    ns: string,
    app: AppLaunch,
    gen: number,
    target: RuntimeTarget,
    door: FrontDoorSettings | undefined,
  ): Promise<void> {
    const { conn } = this;
    const { opts } = conn;
    const name = objectName(app.name);
    if (sleeps(door)) {
      await applyFenced(conn, 'interceptorRoutes', ns, name, gen, () =>
        interceptorRouteObject(ns, app, gen, opts),
      );
      await applyFenced(conn, 'scaledObjects', ns, name, gen, () =>
        kedaScaledObject(ns, app, gen, door!, this.keda),
      );
    }
    if (this.gateway) {
      // The policy before the route it guards, so the route is never served unguarded.
      if (guarded(door, opts) && opts.protection === 'envoy-security-policy')
        await applyFenced(conn, 'securityPolicies', ns, name, gen, () =>
          securityPolicyObject(ns, app, gen, target, door!, opts.verifierUrl!),
        );
      await applyFenced(conn, 'httpRoutes', ns, name, gen, () =>
        httpRouteObject(ns, app, gen, target, opts, door),
      );
      if (!(guarded(door, opts) && opts.protection === 'envoy-security-policy'))
        await conn.removeObject('securityPolicies', ns, name);
      await conn.removeObject('ingresses', ns, name);
    } else {
      await applyFenced(conn, 'ingresses', ns, name, gen, () => ingressWithDoor(ns, app, gen, opts, door));
      await conn.removeObject('httpRoutes', ns, name);
      await conn.removeObject('securityPolicies', ns, name);
    }
    if (door && !sleeps(door)) {
      await conn.removeObject('scaledObjects', ns, name);
      await conn.removeObject('interceptorRoutes', ns, name);
    }
    // What earlier versions wrote: ingress-nginx's access Ingress, KEDA's deprecated HTTPScaledObject.
    await conn.removeObject('ingresses', ns, LEGACY_ACCESS_INGRESS(app.name));
    await conn.removeObject('httpScaledObjects', ns, name);
  }
}
