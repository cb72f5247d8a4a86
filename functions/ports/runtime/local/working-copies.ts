import { existsSync, readdirSync, realpathSync, rmdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { log } from '../../../shared/log.js';
import { TransientError } from '../../../shared/step-errors.js';
import type { RuntimeTarget } from '../port.js';
import { envId, type LocalRuntime, type ProcessRuntimeOptions } from './state.js';

/*
 * Working copies: where the local runtime checks apps out and runs them (`workDir`, outside the data dir),
 * how they are removed, and the server paths (work dir, data dir) that no caller is shown.
 */

/** Working copies of the environment's apps (outside the data dir: see `workDir` in the options). */
export function workDir(rt: LocalRuntime, target: Pick<RuntimeTarget, 'orgId' | 'envKey'>): string {
  return join(rt.opts.workDir, ...envId(target).split('/'));
}

/**
 * `rm -rf`, retried a few times (a directory may be busy a moment after its last writer was killed); a
 * failure names no path (the error reaches API callers as the environment's `error`) and is retried by
 * the state machine.
 */
export function removeTree(path: string) {
  try {
    rmSync(path, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    log.error('could not remove a working copy', { path, code });
    throw new TransientError(`could not remove the working copies (${code})`);
  }
}

/**
 * Remove the working copies no environment of the state owns: `<work dir>/<org>/<owner>/<repo>/<pr>`
 * folders left when the data dir (and with it `state.json`) was deleted or replaced, or by a crash after
 * a teardown. Folders of another shape are left alone; parents left empty go too. Returns how many
 * environments' folders were removed.
 */
export function removeUnowned(rt: LocalRuntime): number {
  const base = rt.opts.workDir;
  let removed = 0;
  const dirs = (path: string) =>
    existsSync(path)
      ? readdirSync(path, { withFileTypes: true })
          .filter((e) => e.isDirectory())
          .map((e) => e.name)
      : [];
  for (const org of dirs(base))
    for (const owner of dirs(join(base, org)))
      for (const repo of dirs(join(base, org, owner)))
        for (const pr of dirs(join(base, org, owner, repo))) {
          if (!/^\d+$/.test(pr) || rt.state.envs[`${org}/${owner}/${repo}/${pr}`]) continue;
          removeTree(join(base, org, owner, repo, pr));
          removed++;
          // Its parents, once empty (deepest first).
          for (const parent of [[org, owner, repo], [org, owner], [org]])
            removeIfEmpty(join(base, ...parent));
        }
  return removed;
}

function removeIfEmpty(path: string) {
  try {
    rmdirSync(path);
  } catch {
    // not empty (or gone): kept
  }
}

/** The server paths replaced in what a caller is shown, with their placeholders. */
export function hiddenPathsOf(opts: Pick<ProcessRuntimeOptions, 'dataDir' | 'workDir'>): [string, string][] {
  // Longest first: the work dir may sit inside the data dir.
  return (
    [
      [resolve(opts.workDir), '<work dir>'],
      [realpathOr(opts.workDir), '<work dir>'],
      [resolve(opts.dataDir), '<data dir>'],
      [realpathOr(opts.dataDir), '<data dir>'],
    ] as [string, string][]
  ).sort((a, b) => b[0].length - a[0].length);
}

/** `text` with this machine's data and work dir paths replaced by placeholders (callers see it). */
export function scrub(rt: LocalRuntime, text: string): string {
  let out = text;
  for (const [path, name] of rt.hiddenPaths) if (path.length > 1) out = out.split(path).join(name);
  return out;
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}
