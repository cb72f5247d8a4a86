/**
 * Scale to zero on KEDA's current API (the HTTP add-on ≥ v0.14, KEDA ≥ v2.17): per sleeping app an
 * `InterceptorRoute` (http.keda.sh/v1beta1: the interceptor's routing, the app's host to its Service) and a
 * standard KEDA `ScaledObject` (keda.sh/v1alpha1) whose trigger is the add-on's `external-push` scaler
 * naming that route, 0..1 replicas, `cooldownPeriod` = the idle time. The way in is routed to the add-on's
 * interceptor proxy (a Service in KEDA's namespace), which holds a request while the app scales up from
 * zero: with Gateway routing an HTTPRoute's backendRef across namespaces, allowed by a `ReferenceGrant`
 * in KEDA's namespace (what the add-on's own xkcd example does); with Ingress routing, an ExternalName
 * Service in the preview's namespace standing for it (an Ingress names Services of its own namespace only).
 *
 * Written against the add-on's CRDs (config/crd/bases of kedacore/http-add-on at 59b2f6a, v0.15.0+) and
 * KEDA's (config/crd/bases/keda.sh_scaledobjects.yaml of kedacore/keda at 8b4f083, v2.20+). The
 * deprecated `HTTPScaledObject` of earlier versions is only removed (door/front-door.ts).
 * Pure builders, like eks/objects.ts.
 */
import type { V1Service } from '@kubernetes/client-node';
import type { AppLaunch, FrontDoorSettings } from '../../port.js';
import type { CustomObject } from '../client.js';
import type { KedaOptions } from '../connection.js';
import { apiVersionOf } from '../engines.js';
import {
  appLabels,
  fitName,
  hostOf,
  LABELS,
  MANAGED_BY,
  type ObjectOptions,
  objectName,
  stamp,
} from '../objects.js';

/** Where KEDA and its HTTP add-on run: their Helm charts' defaults (docs/deploy-to-aws.md). */
export const KEDA_DEFAULTS = {
  namespace: 'keda',
  interceptorService: 'keda-add-ons-http-interceptor-proxy',
  interceptorPort: 8080,
  scalerService: 'keda-add-ons-http-external-scaler',
  scalerPort: 9090,
} as const;

/**
 * How long the interceptor holds a request while the app wakes. The add-on answers 504 when a cold start
 * outlasts its readiness wait (and, in some releases, on the first request after a long idle): a generous
 * wait here, and the run's own wake-and-wait before its first step (docs/reference/access-and-sleep.md).
 */
export const WAKE_READINESS = '120s';

/** The ExternalName Service standing for KEDA's interceptor in a namespace (Ingress routing only). */
export const INTERCEPTOR_SERVICE = 'preview-interceptor';

/** Whether the environment's apps sleep (KEDA) at all. */
export const sleeps = (door: FrontDoorSettings | undefined) => Boolean(door && door.sleepAfterMs > 0);

const keda = (o: KedaOptions = {}) => ({
  namespace: o.namespace ?? KEDA_DEFAULTS.namespace,
  interceptorService: o.interceptorService ?? KEDA_DEFAULTS.interceptorService,
  interceptorPort: o.interceptorPort ?? KEDA_DEFAULTS.interceptorPort,
  scalerAddress: `${KEDA_DEFAULTS.scalerService}.${o.namespace ?? KEDA_DEFAULTS.namespace}:${KEDA_DEFAULTS.scalerPort}`,
});

/** The interceptor proxy as an HTTPRoute's backendRef (across namespaces: `referenceGrantObject`). */
export function interceptorBackend(o: KedaOptions = {}) {
  const k = keda(o);
  return {
    group: '',
    kind: 'Service',
    name: k.interceptorService,
    namespace: k.namespace,
    port: k.interceptorPort,
  };
}

/** An app's InterceptorRoute: its host to its Service (port 80), scaled on concurrency. */
export function interceptorRouteObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  opts: ObjectOptions,
): CustomObject {
  return stamp(
    {
      apiVersion: apiVersionOf('interceptorRoutes'),
      kind: 'InterceptorRoute',
      metadata: { name: objectName(app.name), namespace, labels: appLabels(app.name) },
      spec: {
        target: { service: objectName(app.name), port: 80 },
        rules: [{ hosts: [hostOf(namespace, app.name, opts.domain)] }],
        scalingMetric: { concurrency: { targetValue: 100 } },
        timeouts: { readiness: WAKE_READINESS },
      },
    },
    generation,
  );
}

/** An app's ScaledObject: its Deployment, 0..1 replicas, the add-on's push trigger on its InterceptorRoute. */
export function kedaScaledObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  door: FrontDoorSettings,
  o: KedaOptions = {},
): CustomObject {
  const name = objectName(app.name);
  return stamp(
    {
      apiVersion: apiVersionOf('scaledObjects'),
      kind: 'ScaledObject',
      metadata: { name, namespace, labels: appLabels(app.name) },
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
        minReplicaCount: 0,
        maxReplicaCount: 1,
        // Whole seconds, at least one: KEDA counts the idle time in seconds.
        cooldownPeriod: Math.max(1, Math.round(door.sleepAfterMs / 1000)),
        // Removed (the app no longer sleeps): KEDA puts the Deployment back at its own 1 replica.
        advanced: { restoreToOriginalReplicaCount: true },
        triggers: [
          {
            type: 'external-push',
            metadata: { interceptorRoute: name, scalerAddress: keda(o).scalerAddress },
          },
        ],
      },
    },
    generation,
  );
}

/** The ReferenceGrant in KEDA's namespace letting a preview's HTTPRoutes name the interceptor: its name. */
export const referenceGrantName = (namespace: string) => fitName(`from-${namespace}`);

/** The ReferenceGrant (gateway.networking.k8s.io/v1beta1) of one preview namespace, in KEDA's namespace. */
export function referenceGrantObject(
  namespace: string,
  generation: number,
  o: KedaOptions = {},
): CustomObject {
  const k = keda(o);
  return stamp(
    {
      apiVersion: apiVersionOf('referenceGrants'),
      kind: 'ReferenceGrant',
      metadata: {
        name: referenceGrantName(namespace),
        namespace: k.namespace,
        labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.forNamespace]: namespace },
      },
      spec: {
        from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace }],
        to: [{ group: '', kind: 'Service', name: k.interceptorService }],
      },
    },
    generation,
  );
}

/** The ExternalName Service an Ingress of a sleeping app routes to: KEDA's interceptor proxy. */
export function interceptorServiceObject(
  namespace: string,
  generation: number,
  o: KedaOptions = {},
): V1Service {
  const k = keda(o);
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: INTERCEPTOR_SERVICE, namespace, labels: { [LABELS.managedBy]: MANAGED_BY } },
      spec: {
        type: 'ExternalName',
        externalName: `${k.interceptorService}.${k.namespace}.svc.cluster.local`,
        ports: [{ name: 'http', port: k.interceptorPort, protocol: 'TCP' }],
      },
    },
    generation,
  );
}
