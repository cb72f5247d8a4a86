/**
 * Fencing by generation on the cluster (eks/cluster.ts has the story), as functions of a connection that
 * every writing part shares: a namespace's generation annotation and its compare-and-set, the teardown
 * fence a removed namespace leaves (a ConfigMap in the system namespace), the fenced create-or-replace of
 * one object, and what a failed call means as a step error (a namespace a teardown removed under it:
 * `Superseded`).
 */
import type { V1ConfigMap, V1Namespace } from '@kubernetes/client-node';
import { ConfigError } from '../../../shared/errors.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { DeployFailed, Superseded, TransientError } from '../../../shared/step-errors.js';
import type { RuntimeTarget } from '../port.js';
import { isCode, type Kube, KubeError, type Resource } from './client.js';
import type { EksConnection, Kind, ObjOf } from './connection.js';
import {
  ANNOTATIONS,
  fenceName,
  fenceObject,
  generationOf,
  LABELS,
  MANAGED_BY,
  namespaceName,
  specHashOf,
} from './objects.js';

/** A namespace of that name that this service did not create is never written to nor deleted. */
export function refuseForeign(ns: V1Namespace): void {
  if (ns.metadata?.labels?.[LABELS.managedBy] !== MANAGED_BY)
    throw new DeployFailed(
      `namespace ${ns.metadata?.name} exists but is not managed by ${MANAGED_BY} (no ${LABELS.managedBy}=${MANAGED_BY} label): refusing to touch it`,
    );
}

export function superseded(what: string, current: number, gen: number): Superseded {
  return new Superseded(`${what} belongs to generation ${current}; this is ${gen}`);
}

/** Mark `ns` as at generation `gen`, if nobody changed it since it was read (409 otherwise). */
export async function annotateGeneration(conn: EksConnection, ns: V1Namespace, gen: number): Promise<void> {
  const name = ns.metadata?.name ?? '';
  await conn.call(`annotate Namespace ${name}`, (k) =>
    k.namespaces.patch('', name, {
      metadata: {
        resourceVersion: ns.metadata?.resourceVersion,
        annotations: { [ANNOTATIONS.generation]: String(gen) },
      },
    }),
  );
}

/** The teardown fence of this namespace, if any. */
export function fenceOf(conn: EksConnection, namespace: string): Promise<V1ConfigMap | undefined> {
  return conn.readOrNull('configMaps', conn.systemNamespace, fenceName(namespace));
}

/** The generation of the teardown that last removed this namespace (0: never torn down). */
export async function fenceGeneration(conn: EksConnection, namespace: string): Promise<number> {
  return generationOf(await fenceOf(conn, namespace));
}

/** Record that the environment was torn down at `target.generation` (never lowering a newer fence). */
export async function writeFence(conn: EksConnection, target: RuntimeTarget): Promise<void> {
  const sys = conn.systemNamespace;
  const name = fenceName(namespaceName(target));
  for (let attempt = 0; attempt < 5; attempt++) {
    const existing = await conn.readOrNull('configMaps', sys, name);
    try {
      if (existing) {
        const current = generationOf(existing);
        if (current > target.generation) throw superseded(name, current, target.generation);
        if (current === target.generation) return;
        await conn.call(`replace ConfigMap ${sys}/${name}`, (k) =>
          k.configMaps.replace(sys, name, fenceObject(sys, target, existing.metadata?.resourceVersion)),
        );
        return;
      }
      await conn.call(`create ConfigMap ${sys}/${name}`, (k) =>
        k.configMaps.create(sys, fenceObject(sys, target)),
      );
      return;
    } catch (err) {
      // Removed since it was read (a newer generation re-created the namespace, or the sweep): anew.
      if (isCode(err, 404) && existing) continue;
      if (isCode(err, 404) && !existing) {
        await conn
          .call(`create Namespace ${sys}`, (k) =>
            k.namespaces.create('', {
              apiVersion: 'v1',
              kind: 'Namespace',
              metadata: { name: sys, labels: { [LABELS.managedBy]: MANAGED_BY } },
            }),
          )
          .catch((e) => {
            if (!isCode(e, 409)) throw e;
          });
        continue;
      }
      if (!isCode(err, 409)) throw err;
    }
  }
  throw new TransientError(`the teardown fence ${sys}/${name} kept changing`);
}

/** Delete a fence if it is still the one read (its resourceVersion); false when it changed or went. */
export async function removeFence(conn: EksConnection, fence: V1ConfigMap): Promise<boolean> {
  const sys = conn.systemNamespace;
  const name = fence.metadata?.name ?? '';
  try {
    await conn.call(`delete ConfigMap ${sys}/${name}`, (k) =>
      k.configMaps.remove(sys, name, { resourceVersion: fence.metadata?.resourceVersion }),
    );
    return true;
  } catch (err) {
    // 409: rewritten by a newer teardown since it was read; 404: already gone.
    if (isCode(err, 409) || isCode(err, 404)) return false;
    throw err;
  }
}

/**
 * Create or replace one object, fenced: an object written by a newer generation is Superseded; one
 * whose content hash matches is left alone (only its generation annotation is bumped); any write races
 * (409) are re-read and retried.
 */
export async function applyFenced<K extends Kind>(
  conn: EksConnection,
  kind: K,
  ns: string,
  name: string,
  gen: number,
  build: (existing?: ObjOf<K>) => ObjOf<K>,
): Promise<ObjOf<K>> {
  const res = (k: Kube) => k[kind] as unknown as Resource<ObjOf<K>>;
  const label = `${kind} ${ns}/${name}`;
  for (let attempt = 0; attempt < 5; attempt++) {
    const existing = await conn.readOrNull(kind, ns, name);
    const desired = build(existing);
    try {
      if (!existing) return await conn.call(`create ${label}`, (k) => res(k).create(ns, desired));
      const current = generationOf(existing);
      if (current > gen) throw superseded(label, current, gen);
      if (specHashOf(existing) === specHashOf(desired)) {
        if (current === gen) return existing;
        return await conn.call(`annotate ${label}`, (k) =>
          res(k).patch(ns, name, {
            metadata: {
              resourceVersion: existing.metadata?.resourceVersion,
              annotations: { [ANNOTATIONS.generation]: String(gen) },
            },
          }),
        );
      }
      desired.metadata!.resourceVersion = existing.metadata?.resourceVersion;
      return await conn.call(`replace ${label}`, (k) => res(k).replace(ns, name, desired));
    } catch (err) {
      if (!isCode(err, 409)) throw err;
    }
  }
  throw new TransientError(`${label} kept changing under this deploy`);
}

/** A thrown error as one of the step errors, its message masked. */
export async function explain(
  conn: EksConnection,
  err: unknown,
  target: RuntimeTarget,
  secrets: string[],
): Promise<Error> {
  if (err instanceof Superseded || err instanceof DeployFailed || err instanceof TransientError) return err;
  if (err instanceof ConfigError) return err;
  const mask = (s: string) => maskSecrets(s, secrets);
  if (err instanceof KubeError) {
    const namespaceGone =
      (err.code === 403 && /being terminated/.test(err.detail)) ||
      (err.code === 404 && /^namespaces? "[^"]*" not found/.test(err.detail));
    if (namespaceGone) {
      const fence = await fenceGeneration(conn, namespaceName(target)).catch(() => 0);
      if (fence >= target.generation)
        return new Superseded(`a teardown (generation ${fence}) removed the environment`);
      return new TransientError(mask(err.message));
    }
    if (err.code === 0 || err.code === 401 || err.code === 409 || err.code === 429 || err.code >= 500)
      return new TransientError(mask(err.message));
    return new DeployFailed(`the cluster refused to ${mask(err.message)}`);
  }
  return err instanceof Error ? err : new Error(String(err));
}
