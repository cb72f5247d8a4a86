/**
 * The way in through an Ingress, the explicit choice for operators on a maintained Ingress controller
 * (the AWS Load Balancer Controller's ALB Ingress, say): per app its Ingress (eks/objects.ts
 * `ingressObject`, the operator's class and annotations), routed to KEDA's interceptor stand-in while the
 * app sleeps (door/scale-to-zero.ts). No protection on this path: no maintained Ingress controller asks an
 * external verifier the way this service needs, so a protected preview is refused (door/front-door.ts).
 * ingress-nginx, whose annotations earlier versions wrote, is retired (docs/deploy-to-aws.md).
 */
import type { V1Ingress } from '@kubernetes/client-node';
import type { AppLaunch, FrontDoorSettings } from '../../port.js';
import type { KedaOptions } from '../connection.js';
import { ANNOTATIONS, ingressObject, type ObjectOptions, objectName, stamp } from '../objects.js';
import { INTERCEPTOR_SERVICE, KEDA_DEFAULTS, sleeps } from './scale-to-zero.js';

/** The access Ingress earlier versions wrote beside a protected app's (ingress-nginx): removed on deploy. */
export const LEGACY_ACCESS_INGRESS = (app: string) => `${objectName(app)}.access`;

/** The app's Ingress, routed to the interceptor (keeping the Host, which KEDA routes by) while it sleeps. */
export function ingressWithDoor(
  namespace: string,
  app: AppLaunch,
  generation: number,
  opts: ObjectOptions & { keda?: KedaOptions },
  door: FrontDoorSettings | undefined,
): V1Ingress {
  const ingress = ingressObject(namespace, app, generation, opts);
  if (!sleeps(door)) return ingress;
  for (const rule of ingress.spec?.rules ?? [])
    for (const path of rule.http?.paths ?? [])
      path.backend = {
        service: {
          name: INTERCEPTOR_SERVICE,
          port: { number: opts.keda?.interceptorPort ?? KEDA_DEFAULTS.interceptorPort },
        },
      };
  // Hashed again with what changed, so a change of the door alone rewrites the Ingress.
  delete ingress.metadata!.annotations![ANNOTATIONS.specHash];
  return stamp(ingress, generation);
}
