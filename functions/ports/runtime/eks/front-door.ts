/**
 * The front door of an environment on EKS: existing engines do the work, no proxy of ours runs
 * in the cluster.
 * - Sleep and wake: KEDA's HTTP add-on. Per app whose environment sleeps (`sleepAfterMs` > 0), an
 *   `HTTPScaledObject` (http.keda.sh/v1alpha1: the app's host, its Deployment and Service, replicas 0..1,
 *   `scaledownPeriod` = the idle time) and the app's Ingress routed to the add-on's interceptor, which
 *   holds a request while it scales the Deployment up from zero. An Ingress names Services of its own
 *   namespace only, so a Service `preview-interceptor` of type ExternalName in the environment's namespace
 *   stands for the interceptor's proxy Service.
 * - Protection: the ingress controller's external authentication (ingress-nginx). A protected app's
 *   Ingress carries `auth-url` = the verifier the stack deploys (functions/api/access-verifier.ts), with the
 *   environment in its query; ingress-nginx forwards the visitor's headers (the access cookie, and
 *   `X-Original-URL` for a link's token) and lets the request through on a 2xx, answers 401 otherwise, and
 *   caches the answer per host, cookie and link token (`auth-cache-key`, `auth-cache-duration`), so a page
 *   load costs one check, not one per asset. `auth-always-set-cookie` hands the verifier's `Set-Cookie`
 *   (from an opened link) to the browser. The link's own path (ACCESS_PATH) has an Ingress of its own,
 *   routed to the verifier, which answers it with a redirect to `/` (accessIngressObject).
 * The builders are pure, like objects.ts; `EksFrontDoor` applies them, as part of a deploy (eks/apps.ts).
 */
import type { V1Ingress, V1Service } from '@kubernetes/client-node';
import { ACCESS_COOKIE, ACCESS_PATH } from '../../../shared/access-token.js';
import { log } from '../../../shared/log.js';
import type { AppLaunch, FrontDoorSettings, RuntimeTarget } from '../port.js';
import { type HttpScaledObject, SCALED_OBJECT } from './client.js';
import type { EksConnection, KedaOptions } from './connection.js';
import { applyFenced } from './fences.js';
import {
  ANNOTATIONS,
  appLabels,
  hostOf,
  ingressObject,
  LABELS,
  MANAGED_BY,
  type ObjectOptions,
  objectName,
  stamp,
} from './objects.js';

/** The ExternalName Service standing for KEDA's interceptor in an environment's namespace. */
export const INTERCEPTOR_SERVICE = 'preview-interceptor';
/** The ExternalName Service standing for the access verifier's function URL (a protected environment). */
export const VERIFIER_SERVICE = 'preview-access-verifier';
/** A protected app's second Ingress, for ACCESS_PATH alone (a dot: no app's objectName has one). */
export const accessIngressName = (app: string) => `${objectName(app)}.access`;

/** Where KEDA's HTTP add-on runs: its Helm chart's defaults (docs/deploy-to-aws.md). */
export const KEDA_DEFAULTS = {
  namespace: 'keda',
  interceptorService: 'keda-add-ons-http-interceptor-proxy',
  interceptorPort: 8080,
} as const;

/** How long ingress-nginx keeps the verifier's answer (a rotated key takes effect within this). */
export const AUTH_CACHE_SECONDS = 60;

/** Whether the environment's apps sleep (KEDA) at all. */
export const sleeps = (door: FrontDoorSettings | undefined) => Boolean(door && door.sleepAfterMs > 0);

export function scaledObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  opts: ObjectOptions,
  door: FrontDoorSettings,
): HttpScaledObject {
  return stamp(
    {
      apiVersion: `${SCALED_OBJECT.group}/${SCALED_OBJECT.version}`,
      kind: 'HTTPScaledObject',
      metadata: { name: objectName(app.name), namespace, labels: appLabels(app.name) },
      spec: {
        hosts: [hostOf(namespace, app.name, opts.domain)],
        scaleTargetRef: {
          name: objectName(app.name),
          kind: 'Deployment',
          apiVersion: 'apps/v1',
          service: objectName(app.name),
          port: 80,
        },
        replicas: { min: 0, max: 1 },
        // Whole seconds, at least one: KEDA counts the idle time in seconds.
        scaledownPeriod: Math.max(1, Math.round(door.sleepAfterMs / 1000)),
      },
    },
    generation,
  );
}

/** The ExternalName Service an Ingress of a sleeping app routes to: KEDA's interceptor proxy. */
export function interceptorServiceObject(
  namespace: string,
  generation: number,
  keda: KedaOptions = {},
): V1Service {
  const ns = keda.namespace ?? KEDA_DEFAULTS.namespace;
  const svc = keda.interceptorService ?? KEDA_DEFAULTS.interceptorService;
  const port = keda.interceptorPort ?? KEDA_DEFAULTS.interceptorPort;
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: INTERCEPTOR_SERVICE,
        namespace,
        labels: { [LABELS.managedBy]: MANAGED_BY },
      },
      spec: {
        type: 'ExternalName',
        externalName: `${svc}.${ns}.svc.cluster.local`,
        ports: [{ name: 'http', port, protocol: 'TCP' }],
      },
    },
    generation,
  );
}

/**
 * The ExternalName Service the access Ingresses of a protected environment route to: the verifier's
 * function URL host, on 443 (ingress-nginx resolves it and speaks HTTPS to it: accessIngressObject).
 */
export function verifierServiceObject(namespace: string, generation: number, verifierUrl: string): V1Service {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: VERIFIER_SERVICE, namespace, labels: { [LABELS.managedBy]: MANAGED_BY } },
      spec: {
        type: 'ExternalName',
        externalName: new URL(verifierUrl).hostname,
        ports: [{ name: 'https', port: 443, protocol: 'TCP' }],
      },
    },
    generation,
  );
}

/**
 * A protected app's access Ingress: its host, the path ACCESS_PATH alone (`Exact`, so it wins over the
 * app's `/` prefix), routed to the verifier (VERIFIER_SERVICE) over HTTPS with the function URL's own host
 * name (`upstream-vhost`, SNI), and the same external auth as the app: a valid link's token passes the
 * auth, whose `Set-Cookie` ingress-nginx adds to the verifier's answer, a redirect to `/`
 * (core/access-verify.ts `openedLink`); an invalid one is refused 401 by the auth before. Without it the
 * link's request would reach the app, which knows no such path.
 */
export function accessIngressObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  opts: ObjectOptions & { verifierUrl: string },
  door: FrontDoorSettings,
): V1Ingress {
  const ingress = ingressObject(namespace, app, generation, opts);
  const verifierHost = new URL(opts.verifierUrl).hostname;
  const p = 'nginx.ingress.kubernetes.io/';
  ingress.metadata!.name = accessIngressName(app.name);
  for (const rule of ingress.spec?.rules ?? [])
    rule.http = {
      paths: [
        {
          path: ACCESS_PATH,
          pathType: 'Exact',
          backend: { service: { name: VERIFIER_SERVICE, port: { number: 443 } } },
        },
      ],
    };
  ingress.metadata!.annotations = {
    ...ingress.metadata?.annotations,
    ...authAnnotations(opts.verifierUrl, target, door),
    [`${p}backend-protocol`]: 'HTTPS',
    [`${p}upstream-vhost`]: verifierHost,
    [`${p}proxy-ssl-server-name`]: 'on',
    [`${p}proxy-ssl-name`]: verifierHost,
  };
  delete ingress.metadata!.annotations![ANNOTATIONS.specHash];
  return stamp(ingress, generation);
}

/** The ingress-nginx external-auth annotations of a protected app, asking `verifierUrl` about `target`. */
export function authAnnotations(
  verifierUrl: string,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  door: FrontDoorSettings,
): Record<string, string> {
  const url = new URL(verifierUrl);
  url.searchParams.set('org', target.orgId);
  url.searchParams.set('env', target.envKey);
  if (door.applicationId) url.searchParams.set('app', door.applicationId);
  const p = 'nginx.ingress.kubernetes.io/';
  return {
    [`${p}auth-url`]: url.toString(),
    [`${p}auth-method`]: 'GET',
    [`${p}auth-always-set-cookie`]: 'true',
    // One check per host, cookie and link token; refusals are not cached, so an opened link works at once.
    [`${p}auth-cache-key`]: `$host$cookie_${ACCESS_COOKIE}$arg_token`,
    [`${p}auth-cache-duration`]: `200 202 ${AUTH_CACHE_SECONDS}s`,
  };
}

/**
 * The app's Ingress with its front door: routed to the interceptor (keeping the Host, which KEDA routes
 * by) when the environment sleeps, and the auth annotations when it is protected and a verifier is set.
 */
export function withFrontDoor(
  ingress: V1Ingress,
  generation: number,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  opts: ObjectOptions & { keda?: KedaOptions; verifierUrl?: string },
  door: FrontDoorSettings | undefined,
): V1Ingress {
  if (!door) return ingress;
  if (sleeps(door))
    for (const rule of ingress.spec?.rules ?? [])
      for (const path of rule.http?.paths ?? [])
        path.backend = {
          service: {
            name: INTERCEPTOR_SERVICE,
            port: { number: opts.keda?.interceptorPort ?? KEDA_DEFAULTS.interceptorPort },
          },
        };
  if (door.access === 'protected' && opts.verifierUrl)
    ingress.metadata!.annotations = {
      ...ingress.metadata?.annotations,
      ...authAnnotations(opts.verifierUrl, target, door),
    };
  // Hashed again with what changed, so a change of the door alone rewrites the Ingress.
  delete ingress.metadata!.annotations![ANNOTATIONS.specHash];
  return stamp(ingress, generation);
}

/**
 * An environment's front door applied on the cluster, as part of its deploy (eks/apps.ts): the Services
 * standing for KEDA's interceptor and the verifier in its namespace, and per app its Ingress through the
 * door, its HTTPScaledObject (sleeping) and its access Ingress (protected). What the door no longer wants
 * goes (a preview made public, or never asleep). Every write fenced by generation (fences.ts).
 */
export class EksFrontDoor {
  constructor(private readonly conn: EksConnection) {}

  /** Namespaces the NetworkPolicy admits besides the ingress controller's: KEDA's, when the apps sleep. */
  admitted(door: FrontDoorSettings | undefined): string[] {
    return sleeps(door) ? [this.conn.opts.keda?.namespace ?? KEDA_DEFAULTS.namespace] : [];
  }

  /** The namespace's part of the door: the interceptor's (sleeping) and the verifier's (protected) Services. */
  async prepare(ns: string, gen: number, door: FrontDoorSettings | undefined): Promise<void> {
    const { opts } = this.conn;
    if (door?.access === 'protected' && !opts.verifierUrl)
      log.warn('protected apps without a verifier: ACCESS_VERIFIER_URL is not set, they answer anyone', {
        namespace: ns,
      });
    if (sleeps(door))
      await applyFenced(this.conn, 'services', ns, INTERCEPTOR_SERVICE, gen, () =>
        interceptorServiceObject(ns, gen, opts.keda),
      );
    const verifierUrl = opts.verifierUrl;
    if (door?.access === 'protected' && verifierUrl)
      await applyFenced(this.conn, 'services', ns, VERIFIER_SERVICE, gen, () =>
        verifierServiceObject(ns, gen, verifierUrl),
      );
  }

  /**
   * One app's way in, once its Deployment and Service are written: sleeping, the HTTPScaledObject before
   * the Ingress routes to the interceptor; no longer sleeping, the Ingress back to the Service, then the
   * HTTPScaledObject goes (KEDA leaves the replicas as they are). A protected app's link path goes to the
   * verifier (it sets the cookie); unprotected, that Ingress goes.
   */
  async applyTo(
    ns: string,
    app: AppLaunch,
    gen: number,
    target: RuntimeTarget,
    door: FrontDoorSettings | undefined,
  ): Promise<void> {
    const conn = this.conn;
    const { opts } = conn;
    const name = objectName(app.name);
    if (sleeps(door))
      await applyFenced(conn, 'httpScaledObjects', ns, name, gen, () =>
        scaledObject(ns, app, gen, opts, door!),
      );
    await applyFenced(conn, 'ingresses', ns, name, gen, () =>
      withFrontDoor(ingressObject(ns, app, gen, opts), gen, target, opts, door),
    );
    const access = accessIngressName(app.name);
    const verifierUrl = opts.verifierUrl;
    if (door?.access === 'protected' && verifierUrl)
      await applyFenced(conn, 'ingresses', ns, access, gen, () =>
        accessIngressObject(ns, app, gen, target, { ...opts, verifierUrl }, door),
      );
    else if (door && (await conn.readOrNull('ingresses', ns, access)))
      await conn.removeObject('ingresses', ns, access);
    if (door && !sleeps(door) && (await conn.readOrNull('httpScaledObjects', ns, name)))
      await conn.removeObject('httpScaledObjects', ns, name);
  }
}
