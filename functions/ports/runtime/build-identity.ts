import { createHash } from 'node:crypto';
import type { AppSpec, BuildInputs } from './port.js';

/**
 * An app's build identity: a hash of everything its build output depends on, so that two builds with the
 * same identity make the same image (or local build output) and the second can reuse the first's, from
 * any commit or pull request of the application. It hashes:
 * - the app's build inputs at the commit (core/build-inputs.ts: its context's git tree, its Dockerfile's
 *   blob when outside the context), or the commit itself when none were recorded;
 * - what of its spec its build reads: the Dockerfile's path, the build arguments (and, for a runtime
 *   whose build is a command, that command and the environment it runs with: `extra`);
 * - the builder's version (`builder`): a runtime that builds differently names a new version.
 * Not the commit, when inputs are known: a push that changes only `web/` leaves `api`'s identity alone.
 */
export function buildIdentity(
  app: { spec: AppSpec; inputs?: BuildInputs; sha: string },
  builder: string,
  extra: Record<string, unknown> = {},
): string {
  const { spec, inputs } = app;
  const args = Object.entries(spec.buildArgs ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const material = {
    v: 1,
    builder,
    source: inputs ? { context: inputs.context, dockerfile: inputs.dockerfile ?? null } : { commit: app.sha },
    dockerfile: spec.dockerfile ?? 'Dockerfile',
    buildArgs: args,
    ...extra,
  };
  return createHash('sha256').update(JSON.stringify(material)).digest('hex').slice(0, 40);
}
