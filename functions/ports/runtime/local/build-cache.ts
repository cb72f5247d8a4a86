import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { cp, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoKey } from '../../../manifest/tables.js';
import { newId } from '../../../shared/crypto.js';
import { log } from '../../../shared/log.js';
import { buildIdentity } from '../build-identity.js';
import type { AppSpec, BuildInputs, RuntimeTarget } from '../port.js';
import type { LocalRuntime } from './state.js';
import { workDir } from './working-copies.js';

/*
 * Build outputs kept for reuse by identity (the local half of docs/builds.md): after an app's build
 * succeeds, its working copy is copied to `<workDir>/.build-cache/<scope>/<identity>/tree` (scope: the
 * organization, repository and app), with the commit it was built from beside it. A later build of the
 * same app with the same identity — any pull request, any commit — copies that tree into its own working
 * copy instead of checking out and building. A forced build (`rebuild`) neither reads nor writes it:
 * its output is the asking environment's alone, kept beside its working copies
 * (`<env work dir>/.rebuilt/<app>/`, with the identity it was built at), where the environment's later
 * whole deploys at that identity take it before the shared one (as AWS takes the environment's rebuilt
 * tag); its teardown removes it. Each scope keeps its `KEEP_PER_APP` newest outputs.
 */

/** The local builder: bump when `runBuild` changes what a build output holds. */
export const LOCAL_BUILDER_VERSION = 'local-process/1';
/** How many build outputs of an app are kept for reuse (the newest used). */
const KEEP_PER_APP = 3;

/** An app's local build identity: its inputs, build arguments, and the command and environment it builds with. */
export function localIdentity(spec: AppSpec, sha: string, inputs: BuildInputs | undefined): string {
  const env = Object.entries(spec.env ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return buildIdentity({ spec, sha, inputs }, LOCAL_BUILDER_VERSION, { build: spec.build ?? null, env });
}

function scopeDir(rt: LocalRuntime, target: Pick<RuntimeTarget, 'orgId' | 'repoFullName'>, app: string) {
  const scope = createHash('sha256')
    .update(`${target.orgId}/${repoKey(target.repoFullName)}/${app}`)
    .digest('hex')
    .slice(0, 16);
  return join(rt.opts.workDir, '.build-cache', scope);
}

/** A kept build output of this identity: its tree and the commit it was built from. */
export async function findBuild(
  rt: LocalRuntime,
  target: Pick<RuntimeTarget, 'orgId' | 'repoFullName'>,
  app: string,
  identity: string,
): Promise<{ tree: string; commit: string } | undefined> {
  const dir = join(scopeDir(rt, target, app), identity);
  try {
    const commit = (await readFile(join(dir, 'commit'), 'utf8')).trim();
    const tree = join(dir, 'tree');
    if (!(await stat(tree)).isDirectory()) return undefined;
    const now = new Date();
    await utimes(dir, now, now).catch(() => undefined); // the newest used is kept longest
    return { tree, commit };
  } catch {
    return undefined;
  }
}

/** Copy a tree (copy-on-write where the file system can), symbolic links as they are. */
export function copyTree(from: string, to: string): Promise<void> {
  return cp(from, to, { recursive: true, verbatimSymlinks: true, mode: constants.COPYFILE_FICLONE });
}

/**
 * Keep `dir` (a finished build's working copy) as the output of `identity`, built from `commit`; then
 * drop the scope's oldest beyond `KEEP_PER_APP`. Best effort: a failure is logged, the build stands.
 */
export async function keepBuild(
  rt: LocalRuntime,
  target: Pick<RuntimeTarget, 'orgId' | 'repoFullName'>,
  app: string,
  identity: string,
  dir: string,
  commit: string,
): Promise<void> {
  const scope = scopeDir(rt, target, app);
  const staging = join(scope, `.staging-${newId()}`);
  try {
    await copyTree(dir, join(staging, 'tree'));
    await writeFile(join(staging, 'commit'), `${commit}\n`);
    // Another build of the same identity kept one meanwhile: keep that one.
    await rename(staging, join(scope, identity)).catch(() => rm(staging, { recursive: true, force: true }));
    const kept = await Promise.all(
      (await readdir(scope))
        .filter((e) => !e.startsWith('.'))
        .map(async (e) => ({ e, at: (await stat(join(scope, e))).mtimeMs })),
    );
    kept.sort((a, b) => b.at - a.at);
    for (const { e } of kept.slice(KEEP_PER_APP)) await rm(join(scope, e), { recursive: true, force: true });
  } catch (err) {
    log.warn('could not keep a build output for reuse', { app, error: (err as Error).message });
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The folder of an environment's work dir that holds its rebuilt outputs (`recover` leaves it alone). */
export const REBUILT_DIR = '.rebuilt';

const rebuiltDir = (rt: LocalRuntime, target: Pick<RuntimeTarget, 'orgId' | 'envKey'>, app: string) =>
  join(workDir(rt, target), REBUILT_DIR, app);

/**
 * Keep `dir` (a forced build's finished working copy) as the environment's rebuilt output of `app` at
 * `identity`, replacing the one it kept before. Best effort, like `keepBuild`: a failure is logged.
 */
export async function keepRebuilt(
  rt: LocalRuntime,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  app: string,
  identity: string,
  dir: string,
  commit: string,
): Promise<void> {
  const into = rebuiltDir(rt, target, app);
  const staging = `${into}.staging-${newId()}`;
  try {
    await copyTree(dir, join(staging, 'tree'));
    await writeFile(join(staging, 'commit'), `${commit}\n`);
    await writeFile(join(staging, 'identity'), `${identity}\n`);
    await rm(into, { recursive: true, force: true });
    await rename(staging, into);
  } catch (err) {
    log.warn('could not keep a rebuilt output', { app, error: (err as Error).message });
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The environment's rebuilt output of `app`, when it was built at this identity: its tree and commit. */
export async function findRebuilt(
  rt: LocalRuntime,
  target: Pick<RuntimeTarget, 'orgId' | 'envKey'>,
  app: string,
  identity: string,
): Promise<{ tree: string; commit: string } | undefined> {
  const dir = rebuiltDir(rt, target, app);
  try {
    if ((await readFile(join(dir, 'identity'), 'utf8')).trim() !== identity) return undefined;
    const commit = (await readFile(join(dir, 'commit'), 'utf8')).trim();
    const tree = join(dir, 'tree');
    return (await stat(tree)).isDirectory() ? { tree, commit } : undefined;
  } catch {
    return undefined;
  }
}
