import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { log } from './log.js';

/** Thrown when a directory the local server keeps private cannot be used; the message says why and what to do. */
export class PrivateDirError extends Error {
  override name = 'PrivateDirError';
}

/**
 * Make sure `path` is a directory only this user can enter: created mode 0700 when missing; when it
 * exists, it must be a real directory (not a symlink) owned by this user, and a looser mode is tightened
 * to 0700 with a log line. Refused (PrivateDirError) otherwise: a symlink or a directory of another user
 * at a predictable path (the default working-copy root sits in the shared temp dir) is someone else's
 * trap, and writing secrets or running apps there would hand them over.
 *
 * Owner and mode are read from a descriptor opened with `O_NOFOLLOW`, so what is checked (and chmod-ed)
 * is the directory itself, never what a link points at. On a platform without uids (Windows) only the
 * creation applies.
 */
export function ensurePrivateDir(path: string, what: string): void {
  const existing = lstatOrUndefined(path);
  if (!existing) mkdirSync(path, { recursive: true, mode: 0o700 });
  if (typeof process.getuid !== 'function') return;
  if (existing?.isSymbolicLink()) {
    throw new PrivateDirError(
      `${what} ${path} is a symlink; refusing to use it (point it at the real directory, or remove the link)`,
    );
  }
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    throw new PrivateDirError(`${what} ${path} cannot be opened as a directory (${(err as Error).message})`);
  }
  try {
    const stat = fstatSync(fd);
    const uid = process.getuid();
    if (stat.uid !== uid) {
      throw new PrivateDirError(
        `${what} ${path} belongs to uid ${stat.uid}, not to this user (uid ${uid}); refusing to use it ` +
          '(remove it, or choose another directory)',
      );
    }
    const mode = stat.mode & 0o777;
    if ((mode & 0o077) !== 0) {
      fchmodSync(fd, 0o700);
      log.warn(`${what} was readable by others: mode tightened to 0700`, {
        path,
        was: `0${mode.toString(8)}`,
      });
    }
  } finally {
    closeSync(fd);
  }
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
