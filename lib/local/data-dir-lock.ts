import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/*
 * One process at a time owns a local data dir: the server (`npm start`) for as long as it runs, or a
 * `previewctl` command that opens the database itself because no server runs. The owner is named in
 * `<data dir>/lock.json` ({pid, by, port, startedAt}); a second owner is refused before it touches
 * anything there (a second dynalite on the same files, or a second socket at `dynamodb.sock`, breaks the
 * first). A lock whose process is gone (a killed server) is taken over.
 *
 * The lock file is created with link(2) from a complete temporary file, so it is never seen half
 * written and two starters cannot both create it. Taking over a stale lock renames it away first and
 * checks that what it moved is the stale lock it read; had another starter just taken it over, the moved
 * lock is put back and this start is refused.
 */

/** Who holds a data dir. */
export interface LockOwner {
  pid: number;
  /** `npm start` (the server) or `previewctl` (a command that opened the database itself). */
  by: string;
  /** The server's port once it listens (null before, and for previewctl). */
  port: number | null;
  startedAt: string;
}

/** A data dir another live process holds. The message says which. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly owner: LockOwner,
  ) {
    super(`data dir ${dataDir} is in use by ${describeOwner(owner)}`);
  }
}

export interface DataDirLock {
  readonly path: string;
  readonly owner: LockOwner;
  /** Record the port the server listens on (what a refused second start prints). */
  setPort(port: number): void;
  /** Give the data dir up (only while this lock is still ours). */
  release(): void;
}

export const lockPath = (dataDir: string) => join(dataDir, 'lock.json');

function describeOwner(owner: LockOwner): string {
  const where = owner.port !== null ? `, port ${owner.port}` : owner.by === 'npm start' ? ', starting' : '';
  return `${owner.by} (pid ${owner.pid}${where})`;
}

/** The lock's owner as recorded, or undefined when there is no (readable) lock. */
export function readLock(dataDir: string): LockOwner | undefined {
  let text: string;
  try {
    text = readFileSync(lockPath(dataDir), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const o = JSON.parse(text) as LockOwner;
    return Number.isInteger(o.pid) && o.pid > 0 ? o : undefined;
  } catch {
    return undefined;
  }
}

/** The live owner of `dataDir`, or undefined when it is free (no lock, or its process is gone). */
export function liveOwner(dataDir: string): LockOwner | undefined {
  const owner = readLock(dataDir);
  return owner && isAlive(owner) ? owner : undefined;
}

/**
 * Whether the lock's process still runs. A pid the system has since given to a newer process (it started
 * after the lock was written) does not count.
 */
export function isAlive(owner: LockOwner): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const started = processStartMs(owner.pid);
  const locked = Date.parse(owner.startedAt);
  return started === undefined || Number.isNaN(locked) || started <= locked + 2_000;
}

/** When process `pid` started (Linux: /proc), or undefined where that cannot be read. */
function processStartMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): field 22 is the start time
    // in clock ticks since boot (USER_HZ, 100 on Linux).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'));
    if (!btime || !Number.isFinite(ticks)) return undefined;
    return Number(btime[1]) * 1000 + ticks * 10;
  } catch {
    return undefined;
  }
}

/**
 * Take `dataDir` (which must exist) for this process, as `by`. Throws DataDirInUseError when a live
 * process holds it; a lock left by a process that is gone is taken over.
 */
export function acquireDataDirLock(dataDir: string, by: string): DataDirLock {
  const path = lockPath(dataDir);
  const owner: LockOwner = { pid: process.pid, by, port: null, startedAt: new Date().toISOString() };
  const text = JSON.stringify(owner);
  for (let attempt = 0; attempt < 5; attempt++) {
    const tmp = join(dataDir, `.lock-${process.pid}-${attempt}.tmp`);
    writeFileSync(tmp, text, { mode: 0o600 });
    try {
      linkSync(tmp, path);
      return heldLock(dataDir, owner);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      rmSync(tmp, { force: true });
    }
    const seen = readFileSafe(path);
    if (seen === undefined) continue; // released meanwhile: try again
    const current = readLock(dataDir);
    if (current && isAlive(current)) throw new DataDirInUseError(dataDir, current);
    // Stale (or unreadable): move it away, and make sure what moved is what was judged stale.
    const aside = join(dataDir, `.lock-stale-${process.pid}-${attempt}`);
    try {
      renameSync(path, aside);
    } catch {
      continue; // someone else moved it first
    }
    const moved = readFileSafe(aside);
    if (moved !== seen) {
      // Another starter took the stale lock over between our read and our rename: put theirs back.
      try {
        linkSync(aside, path);
      } catch {
        // the slot was filled again; whoever holds it now is the owner
      }
      rmSync(aside, { force: true });
      const now = readLock(dataDir);
      if (now && isAlive(now)) throw new DataDirInUseError(dataDir, now);
      continue;
    }
    rmSync(aside, { force: true });
  }
  const now = readLock(dataDir);
  if (now) throw new DataDirInUseError(dataDir, now);
  throw new Error(`could not take the lock of data dir ${dataDir} (${path})`);
}

function readFileSafe(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function heldLock(dataDir: string, owner: LockOwner): DataDirLock {
  const path = lockPath(dataDir);
  const ours = () => {
    const now = readLock(dataDir);
    return now?.pid === owner.pid && now.startedAt === owner.startedAt;
  };
  let released = false;
  return {
    path,
    owner,
    setPort(port) {
      if (released || !ours()) return;
      owner.port = port;
      const tmp = join(dataDir, `.lock-${process.pid}-port.tmp`);
      writeFileSync(tmp, JSON.stringify(owner), { mode: 0o600 });
      renameSync(tmp, path);
    },
    release() {
      if (released) return;
      released = true;
      if (ours()) rmSync(path, { force: true });
    },
  };
}
