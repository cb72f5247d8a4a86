import { describe, expect, test } from '@jest/globals';
import type { AppLaunch } from '../../port.js';
import {
  externalAuthFilter,
  securityPolicyObject,
  verifierBackendObject,
  verifierEndpoint,
  verifierServiceObject,
} from './gateway.js';

/*
 * How the in-cluster objects reach the access verifier: a function URL over TLS on 443 (SNI checked), or
 * the stack's internal load balancer over plain HTTP on 80 inside the VPC (it routes by no Host, so the
 * visitor's Host the auth request carries does not matter).
 */

const LB = 'http://internal-preview-verifier-123.eu-west-1.elb.amazonaws.com';
const FN = 'https://abc123.lambda-url.eu-west-1.on.aws/';
const app = { name: 'web', spec: { port: 3000 }, vars: {}, secretKeys: [] } as AppLaunch;
const target = { orgId: 'o1', envKey: 'acme/shop#7' };
const door = { access: 'protected' as const, sleepAfterMs: 0, applicationId: 'app1' };

describe('the verifier as the cluster reaches it', () => {
  test('its endpoint from its URL: https → 443 with TLS, http → 80 without, an explicit port kept', () => {
    expect(verifierEndpoint(FN)).toEqual({
      host: 'abc123.lambda-url.eu-west-1.on.aws',
      port: 443,
      tls: true,
    });
    expect(verifierEndpoint(LB)).toEqual({
      host: 'internal-preview-verifier-123.eu-west-1.elb.amazonaws.com',
      port: 80,
      tls: false,
    });
    expect(verifierEndpoint('http://verifier.internal:8080').port).toBe(8080);
  });

  test("Envoy Gateway's Backend: TLS with SNI for a function URL, plain HTTP for the load balancer", () => {
    const fn = verifierBackendObject('pr-7', 1, FN) as { spec: Record<string, unknown> };
    expect(fn.spec).toEqual({
      endpoints: [{ fqdn: { hostname: 'abc123.lambda-url.eu-west-1.on.aws', port: 443 } }],
      tls: { sni: 'abc123.lambda-url.eu-west-1.on.aws', wellKnownCACertificates: 'System' },
    });
    const lb = verifierBackendObject('pr-7', 1, LB) as { spec: Record<string, unknown> };
    expect(lb.spec).toEqual({
      endpoints: [
        { fqdn: { hostname: 'internal-preview-verifier-123.eu-west-1.elb.amazonaws.com', port: 80 } },
      ],
    });
  });

  test('the SecurityPolicy, the ExternalAuth filter and the ExternalName Service name the same port', () => {
    const policy = securityPolicyObject('pr-7', app, 1, target, door, LB) as unknown as {
      spec: { extAuth: { http: { backendRefs: { port: number }[] } } };
    };
    expect(policy.spec.extAuth.http.backendRefs.map((r) => r.port)).toEqual([80]);
    const filter = externalAuthFilter(target, door, LB) as { externalAuth: { backendRef: { port: number } } };
    expect(filter.externalAuth.backendRef.port).toBe(80);
    expect(verifierServiceObject('pr-7', 1, LB).spec).toEqual({
      type: 'ExternalName',
      externalName: 'internal-preview-verifier-123.eu-west-1.elb.amazonaws.com',
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    });
    expect(verifierServiceObject('pr-7', 1, FN).spec?.ports).toEqual([
      { name: 'https', port: 443, protocol: 'TCP' },
    ]);
  });
});
