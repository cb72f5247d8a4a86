import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FENCE_RETENTION_MS } from '../../functions/core/environments/expiry.js';
import { type Cloud, startCloud } from './cloud-tier.js';
import type { FakeKubernetes } from './fakes/kubernetes/index.js';

/*
 * Teardown fences left behind, in the cloud simulation tier: the expiry sweep's handler in PREVIEW_MODE=aws,
 * as its schedule invokes it, reaching the fake cluster through the EKS adapter (a presigned token the fake
 * verifies). It removes the fences past the retention whose namespace is gone, and no other.
 */

const MANAGED = { 'app.kubernetes.io/managed-by': 'preview-control-plane' };
let cloud: Cloud;
let kube: FakeKubernetes;

beforeAll(async () => {
  cloud = await startCloud({}, { kubernetes: true });
  kube = cloud.kube!;
}, 60_000);
afterAll(() => cloud?.stop(), 30_000);

const fence = (namespace: string, tornDownAt: Date) =>
  kube.seed('configmaps', 'preview-system', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: `fence-${namespace}`,
      labels: MANAGED,
      annotations: { 'preview-control-plane/generation': '4' },
    },
    data: { namespace, tornDownAt: tornDownAt.toISOString() },
  });
const fences = () =>
  kube
    .list('configmaps', 'preview-system')
    .map((o) => o.metadata.name as string)
    .sort();

describe('the expiry sweep in AWS mode', () => {
  test('removes the fences past the retention whose namespace is gone, keeps the others', async () => {
    kube.seed('namespaces', '', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'preview-system', labels: MANAGED },
    });
    const old = new Date(Date.now() - FENCE_RETENTION_MS - 3600_000);
    fence('p-gone-long-ago', old);
    fence('p-gone-just-now', new Date());
    // Torn down long ago, and deployed again since by someone not removing the fence: the namespace is there.
    kube.seed('namespaces', '', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'p-back-again', labels: MANAGED },
    });
    fence('p-back-again', old);

    const out = await cloud.invoke<{ fencesRemoved: number }>('functions/events/expiry-sweep.ts', {
      source: 'aws.events',
      'detail-type': 'Scheduled Event',
      detail: {},
    });
    expect(out).toMatchObject({ checked: 0, expired: 0, restarted: 0, fencesRemoved: 1 });
    expect(fences()).toEqual(['fence-p-back-again', 'fence-p-gone-just-now']);
    expect(kube.requests).toContain(
      'DELETE /api/v1/namespaces/preview-system/configmaps/fence-p-gone-long-ago',
    );

    // The next run finds nothing more to remove.
    expect(
      await cloud.invoke<{ fencesRemoved: number }>('functions/events/expiry-sweep.ts', { detail: {} }),
    ).toMatchObject({ fencesRemoved: 0 });
  });
});
