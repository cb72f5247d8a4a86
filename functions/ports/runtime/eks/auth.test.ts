import { describe, expect, test } from '@jest/globals';
import { tokenProblem } from '../../../../test/cloud/fakes/kubernetes/index.js';
import { CLUSTER, CREDENTIALS, REGION } from '../../../../test/support/eks-cluster.js';
import { EksTokens, eksToken } from './auth.js';

/*
 * The EKS cluster's bearer tokens (auth.ts), checked by the fake Kubernetes API's own verifier (SigV4
 * recomputed with these test credentials).
 */

describe('cluster access', () => {
  test('a token is k8s-aws-v1. + base64url of a presigned GetCallerIdentity URL bound to the cluster', async () => {
    const token = await eksToken({ clusterName: CLUSTER, region: REGION, credentials: CREDENTIALS });
    expect(token).toMatch(/^k8s-aws-v1\.[A-Za-z0-9_-]+$/);
    const url = new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString());
    expect(url.host).toBe(`sts.${REGION}.amazonaws.com`);
    expect(url.searchParams.get('Action')).toBe('GetCallerIdentity');
    expect(url.searchParams.get('X-Amz-Expires')).toBe('60');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');
    const check = { clusterName: CLUSTER, region: REGION, verify: CREDENTIALS };
    expect(tokenProblem(`Bearer ${token}`, check)).toBeUndefined();
    expect(tokenProblem(`Bearer ${token}`, { ...check, clusterName: 'another' })).toMatch(/signature/);
    expect(
      tokenProblem(`Bearer ${token}`, { ...check, verify: { ...CREDENTIALS, secretAccessKey: 'other' } }),
    ).toMatch(/signature/);
  });

  test('tokens are cached and signed again after 10 minutes', async () => {
    let now = Date.now();
    let signed = 0;
    const tokens = new EksTokens({
      clusterName: CLUSTER,
      region: REGION,
      credentials: async () => {
        signed++;
        return CREDENTIALS;
      },
      now: () => now,
    });
    const first = await tokens.get();
    now += 9 * 60_000;
    expect(await tokens.get()).toBe(first);
    now += 2 * 60_000;
    const second = await tokens.get();
    expect(second).not.toBe(first);
    expect(signed).toBe(2);
  });
});
