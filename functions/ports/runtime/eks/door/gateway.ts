/**
 * The way in on the Gateway API (the default routing): per app an `HTTPRoute` (gateway.networking.k8s.io/v1,
 * standard channel) with the app's host, attached to the Gateway the operator runs (name, namespace and
 * listener: the stack's settings), its backend the app's Service, or KEDA's interceptor while the app sleeps
 * (door/scale-to-zero.ts). A protected app's route has two rules: the access link's path (ACCESS_PATH,
 * `Exact`) and everything else (`PathPrefix /`); both ask the verifier first, one of two ways (the stack's
 * protection setting):
 * - `envoy-security-policy`: Envoy Gateway's `SecurityPolicy` (gateway.envoyproxy.io/v1alpha1) targeting
 *   the HTTPRoute, `extAuth.http` to the verifier (a `Backend` of the FQDN kind with TLS, in the preview's
 *   namespace), the visitor's `Cookie` forwarded (`headersToExtAuth`);
 * - `gateway-external-auth`: the Gateway API's `ExternalAuth` filter (GEP-1494) on each rule, which only
 *   the experimental channel's HTTPRoute CRD accepts, to an ExternalName Service standing for the verifier.
 * Either way the auth request carries the visitor's `Host`; the verifier reads whose preview from the
 * path (shared/access-token.ts `verifyPath`: the gateway appends the visitor's path and query) and never
 * routes by `Host`. A valid link is answered by the verifier itself, a redirect to `/` with the cookie,
 * which the gateway hands the visitor as it does any refusal; the link's rule never reaches the app.
 *
 * Written against the Gateway API's CRDs (config/crd/{standard,experimental} of kubernetes-sigs/gateway-api at
 * 4564255, v1.6.1+) and Envoy Gateway's (charts/gateway-helm/charts/crds of envoyproxy/gateway at d32f282,
 * v1.9+). Pure builders, like eks/objects.ts.
 */
import type { V1Service } from '@kubernetes/client-node';
import { ACCESS_PATH, verifyPath } from '../../../../shared/access-token.js';
import type { AppLaunch, FrontDoorSettings, RuntimeTarget } from '../../port.js';
import type { CustomObject } from '../client.js';
import type { KedaOptions } from '../connection.js';
import { apiVersionOf } from '../engines.js';
import { appLabels, hostOf, LABELS, MANAGED_BY, type ObjectOptions, objectName, stamp } from '../objects.js';
import { interceptorBackend, sleeps } from './scale-to-zero.js';

/** The verifier in a protected preview's namespace: a Backend (Envoy) or an ExternalName Service. */
export const VERIFIER_BACKEND = 'preview-access-verifier';

const GATEWAY_GROUP = 'gateway.networking.k8s.io';

/**
 * The verifier's port and whether it speaks TLS, from its URL: a function URL is `https://…` (443, TLS with
 * its name); the stack's internal load balancer is `http://…` (80, inside the cluster's VPC).
 */
export function verifierEndpoint(verifierUrl: string): { host: string; port: number; tls: boolean } {
  const url = new URL(verifierUrl);
  const tls = url.protocol === 'https:';
  return { host: url.hostname, port: url.port ? Number(url.port) : tls ? 443 : 80, tls };
}

/** Whether the app asks the verifier first (protected, and the stack has a verifier). */
export const guarded = (door: FrontDoorSettings | undefined, opts: { verifierUrl?: string }) =>
  door?.access === 'protected' && Boolean(opts.verifierUrl);

/** The ExternalAuth filter (GEP-1494) asking the verifier about `target`. */
export function externalAuthFilter(
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  door: FrontDoorSettings,
  verifierUrl: string,
): Record<string, unknown> {
  return {
    type: 'ExternalAuth',
    externalAuth: {
      protocol: 'HTTP',
      backendRef: {
        group: '',
        kind: 'Service',
        name: VERIFIER_BACKEND,
        port: verifierEndpoint(verifierUrl).port,
      },
      http: {
        path: verifyPath({ ...target, applicationId: door.applicationId }),
        allowedHeaders: ['cookie', 'x-forwarded-proto'],
      },
    },
  };
}

/** An app's HTTPRoute: its host on the operator's Gateway, to its Service or (asleep) the interceptor. */
export function httpRouteObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  opts: ObjectOptions & { keda?: KedaOptions; verifierUrl?: string },
  door: FrontDoorSettings | undefined,
): CustomObject {
  const gateway = opts.gateway;
  if (!gateway)
    throw new Error('Gateway routing without a Gateway (EKS_GATEWAY_NAME, EKS_GATEWAY_NAMESPACE)');
  const backend = sleeps(door)
    ? interceptorBackend(opts.keda)
    : { group: '', kind: 'Service', name: objectName(app.name), port: 80 };
  const filters =
    door && guarded(door, opts) && opts.protection === 'gateway-external-auth'
      ? { filters: [externalAuthFilter(target, door, opts.verifierUrl!)] }
      : {};
  const rule = (path: Record<string, string>) => ({
    matches: [{ path }],
    backendRefs: [backend],
    ...filters,
  });
  return stamp(
    {
      apiVersion: apiVersionOf('httpRoutes'),
      kind: 'HTTPRoute',
      metadata: { name: objectName(app.name), namespace, labels: appLabels(app.name) },
      spec: {
        parentRefs: [
          {
            group: GATEWAY_GROUP,
            kind: 'Gateway',
            name: gateway.name,
            namespace: gateway.namespace,
            ...(gateway.sectionName ? { sectionName: gateway.sectionName } : {}),
          },
        ],
        hostnames: [hostOf(namespace, app.name, opts.domain)],
        rules: [
          ...(door && guarded(door, opts) ? [rule({ type: 'Exact', value: ACCESS_PATH })] : []),
          rule({ type: 'PathPrefix', value: '/' }),
        ],
      },
    },
    generation,
  );
}

/** A protected app's SecurityPolicy (Envoy Gateway): its HTTPRoute's requests asked of the verifier first. */
export function securityPolicyObject(
  namespace: string,
  app: AppLaunch,
  generation: number,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  door: FrontDoorSettings,
  verifierUrl: string,
): CustomObject {
  const name = objectName(app.name);
  return stamp(
    {
      apiVersion: apiVersionOf('securityPolicies'),
      kind: 'SecurityPolicy',
      metadata: { name, namespace, labels: appLabels(app.name) },
      spec: {
        targetRefs: [{ group: GATEWAY_GROUP, kind: 'HTTPRoute', name }],
        extAuth: {
          http: {
            backendRefs: [
              {
                group: 'gateway.envoyproxy.io',
                kind: 'Backend',
                name: VERIFIER_BACKEND,
                port: verifierEndpoint(verifierUrl).port,
              },
            ],
            path: verifyPath({ ...target, applicationId: door.applicationId }),
          },
          // Only Host, Method, Path, Content-Length and Authorization are sent unless named: the cookie is.
          headersToExtAuth: ['cookie', 'x-forwarded-proto'],
        },
      },
    },
    generation,
  );
}

/**
 * The verifier as an Envoy Gateway `Backend`: its host name and port; over TLS with that name (SNI, checked)
 * when its URL is https (a function URL), plain HTTP inside the VPC to the stack's internal load balancer.
 */
export function verifierBackendObject(
  namespace: string,
  generation: number,
  verifierUrl: string,
): CustomObject {
  const { host, port, tls } = verifierEndpoint(verifierUrl);
  return stamp(
    {
      apiVersion: apiVersionOf('backends'),
      kind: 'Backend',
      metadata: { name: VERIFIER_BACKEND, namespace, labels: { [LABELS.managedBy]: MANAGED_BY } },
      spec: {
        endpoints: [{ fqdn: { hostname: host, port } }],
        ...(tls ? { tls: { sni: host, wellKnownCACertificates: 'System' } } : {}),
      },
    },
    generation,
  );
}

/** The verifier as an ExternalName Service (the ExternalAuth filter names a Service). */
export function verifierServiceObject(namespace: string, generation: number, verifierUrl: string): V1Service {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: VERIFIER_BACKEND, namespace, labels: { [LABELS.managedBy]: MANAGED_BY } },
      spec: {
        type: 'ExternalName',
        externalName: verifierEndpoint(verifierUrl).host,
        ports: [
          {
            name: verifierEndpoint(verifierUrl).tls ? 'https' : 'http',
            port: verifierEndpoint(verifierUrl).port,
            protocol: 'TCP',
          },
        ],
      },
    },
    generation,
  );
}
