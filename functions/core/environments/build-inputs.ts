import { posix } from 'node:path';
import type { AppSpec, BuildInputs } from '../../ports/runtime/port.js';
import type { SourceHost } from '../../ports/source-host/port.js';

/**
 * What each app's build reads from the repository at a commit, as git object ids (the ReadConfig step
 * records them with the app specs; the runtime hashes them with the app's build arguments and its
 * builder's version into the app's build identity, ports/runtime/build-identity.ts):
 * - the tree of its build context (`context`, default the repository root);
 * - the blob of its Dockerfile (`dockerfile`, relative to the context, default `Dockerfile`) when the
 *   file lies outside the context (inside, the context's tree already covers it).
 * Git object ids are content hashes: an app whose context is the same tree at two commits has the same
 * inputs, whatever else changed. An app whose context the commit does not have gets none: it is
 * identified by the commit alone, and its build says what is missing.
 */
export async function buildInputs(
  sourceHost: Pick<SourceHost, 'objectId'>,
  repoFullName: string,
  sha: string,
  apps: Record<string, AppSpec>,
): Promise<Record<string, BuildInputs>> {
  const entries = await Promise.all(
    Object.entries(apps).map(async ([name, spec]) => {
      const context = posix.normalize(spec.context ?? '.');
      const dockerfile = posix.normalize(posix.join(context, spec.dockerfile ?? 'Dockerfile'));
      const tree = await sourceHost.objectId(repoFullName, sha, context);
      if (tree?.type !== 'tree') return [];
      const inside = context === '.' || dockerfile.startsWith(`${context}/`);
      const file = inside ? undefined : await sourceHost.objectId(repoFullName, sha, dockerfile);
      const inputs: BuildInputs = { context: tree.id, ...(file ? { dockerfile: file.id } : {}) };
      return [[name, inputs] as const];
    }),
  );
  return Object.fromEntries(entries.flat());
}
