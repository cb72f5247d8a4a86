import { describe, expect, test } from '@jest/globals';
import {
  API,
  at,
  cluster,
  IMAGE2,
  kube,
  launch,
  nextPr,
  snapshot,
  TICK_MS,
  target,
  useFakeCluster,
  WEB,
} from '../../../../test/support/eks-cluster.js';
import { namespaceName } from './objects.js';

/*
 * The EKS cluster adapter's generations (test/support/eks-cluster.ts has the fake cluster): an older
 * generation's deploy or teardown refused, teardown deleting the namespace and fencing what came before,
 * the fence's life (removed by a newer generation, written anew, pruned).
 */

useFakeCluster();

describe('EksCluster', () => {
  test('a deploy or teardown of an older generation is refused with Superseded and changes nothing', async () => {
    nextPr();
    const c = cluster();
    const t = target(2);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
    kube.autoAdvance(0);
    try {
      const before = snapshot(ns);
      await expect(
        c.deploy(at(t, 1), [launch('web', WEB, 'old', IMAGE2)], { prune: true }),
      ).rejects.toMatchObject({
        name: 'Superseded',
      });
      await expect(c.deploy(at(t, 1), [launch('web', WEB, 'old')], { restart: true })).rejects.toMatchObject({
        name: 'Superseded',
      });
      await expect(c.teardown(at(t, 1))).rejects.toMatchObject({ name: 'Superseded' });
      expect(snapshot(ns)).toEqual(before);
      expect(kube.get('namespaces', '', ns)!.metadata.deletionTimestamp).toBeUndefined();
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('teardown deletes the namespace (foreground), resolves once it is gone, is idempotent, and fences', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    await c.teardown(at(t, 2));
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
    expect(kube.requests).toContain(`DELETE /api/v1/namespaces/${ns}`);
    await c.teardown(at(t, 2));
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
    // A newer deploy (the PR reopened) brings it back.
    await c.deploy(at(t, 3), [launch('web', WEB)], { prune: true });
    expect(kube.get('namespaces', '', ns)!.metadata.annotations['preview-control-plane/generation']).toBe(
      '3',
    );
    await c.teardown(at(t, 4));
  });

  test('teardown of an environment never deployed fences it too', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    await c.teardown(at(t, 2));
    await c.teardown(at(t, 2));
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    expect(kube.get('namespaces', '', namespaceName(t))).toBeUndefined();
  });

  test('a newer generation creating the namespace again removes the stale fence: its annotation fences', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    const fence = () => kube.get('configmaps', 'preview-system', `fence-${ns}`);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    await c.teardown(at(t, 2));
    expect(fence()?.metadata.annotations['preview-control-plane/generation']).toBe('2');
    await c.deploy(at(t, 3), [launch('web', WEB)], { prune: true });
    expect(fence()).toBeUndefined();
    expect(kube.requests).toContain(`DELETE /api/v1/namespaces/preview-system/configmaps/fence-${ns}`);
    // Older generations are still refused, by the namespace now.
    await expect(c.deploy(t, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    await expect(c.teardown(at(t, 2))).rejects.toMatchObject({ name: 'Superseded' });
    // The next teardown fences again.
    await c.teardown(at(t, 4));
    expect(fence()?.metadata.annotations['preview-control-plane/generation']).toBe('4');
    await expect(c.deploy(at(t, 3), [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
  });

  test('a fence removed between the teardown reading it and raising it is written anew', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.teardown(at(t, 2));
    // The sweep (or a newer generation) removes the fence just as the next teardown replaces it.
    kube.beforeNext(`PUT /api/v1/namespaces/preview-system/configmaps/fence-${ns}`, () =>
      kube.drop('configmaps', 'preview-system', `fence-${ns}`),
    );
    await c.teardown(at(t, 3));
    expect(
      kube.get('configmaps', 'preview-system', `fence-${ns}`)?.metadata.annotations[
        'preview-control-plane/generation'
      ],
    ).toBe('3');
    await expect(c.deploy(at(t, 2), [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
  });

  test('pruneFences removes the fences past the cutoff whose namespace is gone, and only those', async () => {
    const c = cluster();
    // A torn-down environment (its fence now), one still running with an old fence, one long gone.
    nextPr();
    const recent = target(1);
    await c.teardown(at(recent, 2));
    nextPr();
    const running = target(1);
    await c.deploy(running, [launch('web', WEB)], { prune: true });
    const old = '2020-01-01T00:00:00.000Z';
    const seedFence = (namespace: string, data: Record<string, string> = { tornDownAt: old }) =>
      kube.seed('configmaps', 'preview-system', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: `fence-${namespace}`,
          labels: { 'app.kubernetes.io/managed-by': 'preview-control-plane' },
          annotations: { 'preview-control-plane/generation': '1' },
        },
        data: { namespace, ...data },
      });
    seedFence(namespaceName(running));
    seedFence('p-gone-long-ago');
    // Someone else's ConfigMap in the system namespace is not a fence.
    kube.seed('configmaps', 'preview-system', {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'operator-notes',
        labels: { 'app.kubernetes.io/managed-by': 'preview-control-plane' },
      },
      data: { tornDownAt: old },
    });
    const names = () => kube.list('configmaps', 'preview-system').map((o) => o.metadata.name);
    const cutoff = new Date(Date.now() - 3600_000);

    expect(await c.pruneFences(cutoff)).toEqual({ removed: 1 });
    expect(names()).not.toContain('fence-p-gone-long-ago');
    expect(names()).toEqual(
      expect.arrayContaining([
        `fence-${namespaceName(recent)}`, // newer than the cutoff
        `fence-${namespaceName(running)}`, // its namespace exists
        'operator-notes',
      ]),
    );
    // The recent fence still refuses its older generations; past its time, it goes too.
    await expect(c.deploy(recent, [launch('web', WEB)])).rejects.toMatchObject({ name: 'Superseded' });
    // (with the fences the tests above left, their namespaces gone too)
    expect((await c.pruneFences(new Date(Date.now() + 60_000))).removed).toBeGreaterThanOrEqual(1);
    expect(names()).not.toContain(`fence-${namespaceName(recent)}`);
    expect(names()).toContain(`fence-${namespaceName(running)}`);
    await c.teardown(at(running, 2));
  });
});
