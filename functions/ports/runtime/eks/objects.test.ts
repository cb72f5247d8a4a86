import { describe, expect, test } from '@jest/globals';
import { DOMAIN } from '../../../../test/support/eks-cluster.js';
import { fitName, hostOf, internalUrl, namespaceName, objectName } from './objects.js';

/* The names the EKS cluster adapter gives namespaces, hosts and objects (objects.ts). */

describe('names', () => {
  const longest = {
    orgId: 'org-x',
    repoFullName: `${'o'.repeat(39)}/${'r'.repeat(100)}`,
    prNumber: 2147483647,
  };

  test('a namespace name is a DNS label of at most 63 characters for the longest names GitHub allows', () => {
    const ns = namespaceName(longest);
    expect(ns.length).toBeLessThanOrEqual(63);
    expect(ns).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(ns).toMatch(/^pv-o{10}-r{27}-2147483647-[0-9a-f]{10}$/);
    expect(namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/shop` })).toMatch(
      /^pv-o{33}-shop-2147483647-[0-9a-f]{10}$/,
    );
    expect(namespaceName({ orgId: 'o', repoFullName: 'Acme.Corp/My_Repo', prNumber: 7 })).toMatch(
      /^pv-acme-corp-my-repo-7-[0-9a-f]{10}$/,
    );
  });

  test('two names sharing a long prefix, or differing in org or PR only, get different namespaces', () => {
    const a = namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/${'r'.repeat(99)}a` });
    const b = namespaceName({ ...longest, repoFullName: `${'o'.repeat(39)}/${'r'.repeat(99)}b` });
    expect(a).not.toBe(b);
    expect(a.slice(0, 50)).toBe(b.slice(0, 50));
    expect(namespaceName({ ...longest, orgId: 'org-y' })).not.toBe(namespaceName(longest));
    expect(namespaceName({ ...longest, prNumber: 1 })).not.toBe(namespaceName(longest));
    // GitHub's names are case-insensitive: so is the namespace.
    expect(namespaceName({ ...longest, repoFullName: longest.repoFullName.toUpperCase() })).toBe(
      namespaceName(longest),
    );
  });

  test('hosts stay one DNS label under the domain; object names are valid Service names', () => {
    const ns = namespaceName(longest);
    const host = hostOf(ns, 'a'.repeat(63), DOMAIN);
    expect(host.endsWith(`.${DOMAIN}`)).toBe(true);
    expect(host.split('.')[0]!.length).toBeLessThanOrEqual(63);
    expect(hostOf(ns, 'a'.repeat(63), DOMAIN)).not.toBe(hostOf(ns, `${'a'.repeat(62)}b`, DOMAIN));
    expect(hostOf('pv-acme-shop-1-0123456789', 'web', DOMAIN)).toBe(
      `web-pv-acme-shop-1-0123456789.${DOMAIN}`,
    );
    expect(objectName('web')).toBe('web');
    expect(objectName('2fa')).toMatch(/^a[0-9a-f]{6}-2fa$/);
    expect(fitName('x'.repeat(80)).length).toBe(63);
    expect(internalUrl({ orgId: 'o', repoFullName: 'acme/shop', prNumber: 3 }, 'api')).toBe(
      `http://api.${namespaceName({ orgId: 'o', repoFullName: 'acme/shop', prNumber: 3 })}.svc.cluster.local`,
    );
  });
});
