import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Resource limits of each local sandbox (a build or an app under bubblewrap), with what this machine
 * offers for each:
 *
 * - memory and processes: a cgroup per sandbox (v2, or v1's `memory` and `pids` hierarchies), made under
 *   the server's own cgroup, where the server may create one (root, or a delegated v2 subtree). The
 *   kernel enforces them for the whole sandbox: an app over its memory is OOM-killed, a fork past its
 *   process count fails. Where no cgroup can be made they are not enforced (RLIMIT_NPROC counts every
 *   process of the user, and root is exempt from it; RLIMIT_AS breaks runtimes that reserve address
 *   space, such as Node), and `npm start` says so.
 * - files: RLIMIT_FSIZE (`ulimit -f`), the largest file a sandbox may write, in its working copy or
 *   anywhere (a write past it fails, or the process gets SIGXFSZ). It bounds each file, not the sum.
 * - `/tmp`: the sandbox's tmpfs gets a size (bwrap `--size`): a write past it fails with ENOSPC.
 * - disk: the working copy's size, measured with `du` every 30 s while the sandbox runs (see
 *   `DiskWatch`); past the limit the sandbox is killed. A quota the kernel keeps would need a filesystem
 *   per working copy (a loop device or a project quota), which a plain machine does not offer.
 */

export interface SandboxLimits {
  memoryMiB: number;
  processes: number;
  fileMiB: number;
  tmpMiB: number;
  /** The working copy, all files together (what its `npm install` and build add included). */
  diskMiB: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  memoryMiB: 1024,
  processes: 256,
  fileMiB: 1024,
  tmpMiB: 64,
  diskMiB: 4096,
};

/** A limit a sandbox hit that the runtime learns of from outside (not from the sandbox's own errors). */
export type LimitHit = 'memory' | 'processes' | 'disk';

const VARS: Record<keyof SandboxLimits, string> = {
  memoryMiB: 'PREVIEW_SANDBOX_MEMORY_MB',
  processes: 'PREVIEW_SANDBOX_PROCESSES',
  fileMiB: 'PREVIEW_SANDBOX_FILE_MB',
  tmpMiB: 'PREVIEW_SANDBOX_TMP_MB',
  diskMiB: 'PREVIEW_SANDBOX_DISK_MB',
};

/** The limits from `PREVIEW_SANDBOX_*` (each a positive integer; unset: the default). */
export function limitsFromEnv(env: NodeJS.ProcessEnv = process.env): SandboxLimits {
  const limits = { ...DEFAULT_LIMITS };
  for (const [key, name] of Object.entries(VARS) as [keyof SandboxLimits, string][]) {
    const raw = env[name]?.trim();
    if (!raw) continue;
    if (!/^[1-9]\d{0,6}$/.test(raw)) throw new Error(`${name} must be a positive whole number (got ${raw})`);
    limits[key] = Number(raw);
  }
  return limits;
}

type Controller = 'memory' | 'pids';

/** Where this process may make cgroups for `controller`, and of which version; undefined: nowhere. */
interface CgroupBase {
  dir: string;
  version: 1 | 2;
}

let bases: Partial<Record<Controller, CgroupBase | null>> | undefined;

/** The cgroup directories of this process, per controller (v1), or its v2 one under `memory`/`pids`. */
function ownCgroups(): Partial<Record<Controller, CgroupBase>> {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
  } catch {
    return {};
  }
  const found: Partial<Record<Controller, CgroupBase>> = {};
  for (const line of lines) {
    const [, list, path] = line.split(':', 3) as [string, string, string];
    if (list === '') {
      // v2: the unified hierarchy, at /sys/fs/cgroup or (hybrid) /sys/fs/cgroup/unified.
      const root = existsSync('/sys/fs/cgroup/cgroup.controllers')
        ? '/sys/fs/cgroup'
        : '/sys/fs/cgroup/unified';
      const dir = join(root, path);
      let controllers = '';
      try {
        controllers = readFileSync(join(dir, 'cgroup.controllers'), 'utf8');
      } catch {}
      for (const c of ['memory', 'pids'] as Controller[])
        if (controllers.split(/\s+/).includes(c)) found[c] ??= { dir, version: 2 };
      continue;
    }
    for (const c of ['memory', 'pids'] as Controller[])
      if (list.split(',').includes(c)) found[c] = { dir: join('/sys/fs/cgroup', c, path), version: 1 };
  }
  return found;
}

/** The limit file of `controller` in a cgroup of `version`. */
const limitFile = (c: Controller, version: 1 | 2) =>
  c === 'pids' ? 'pids.max' : version === 1 ? 'memory.limit_in_bytes' : 'memory.max';

/** Whether a sandbox cgroup for `controller` can be made here: tried once (make, limit, remove). */
function base(c: Controller): CgroupBase | undefined {
  bases ??= {};
  if (bases[c] === undefined) {
    const own = ownCgroups()[c];
    bases[c] = null;
    if (own) {
      const probe = join(own.dir, `preview-probe-${process.pid}`);
      try {
        mkdirSync(probe);
        try {
          if (own.version === 2) enableController(own.dir, c);
          writeFileSync(join(probe, limitFile(c, own.version)), c === 'pids' ? '100' : String(1 << 30));
          bases[c] = own;
        } finally {
          rmdirSync(probe);
        }
      } catch {
        // Not ours to make (no permission, a v2 parent with processes of its own): not enforced.
      }
    }
  }
  return bases[c] ?? undefined;
}

/** v2: a child cgroup has a controller only when its parent passes it down. */
function enableController(dir: string, c: Controller) {
  const enabled = readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
  if (!enabled.includes(c)) writeFileSync(join(dir, 'cgroup.subtree_control'), `+${c}`);
}

/** What this machine enforces of the limits (for the line `npm start` prints). */
export function limitsSupport(): { memory: boolean; processes: boolean } {
  return { memory: base('memory') !== undefined, processes: base('pids') !== undefined };
}

/** One line for the operator: the limits each sandbox gets, and those this machine cannot enforce. */
export function describeLimits(limits: SandboxLimits): string {
  const support = limitsSupport();
  const missing = [...(support.memory ? [] : ['memory']), ...(support.processes ? [] : ['processes'])];
  const line =
    `sandbox limits: memory ${limits.memoryMiB} MiB, ${limits.processes} processes, files up to ` +
    `${limits.fileMiB} MiB, /tmp ${limits.tmpMiB} MiB, working copy ${limits.diskMiB} MiB`;
  if (missing.length === 0) return line;
  return (
    `${line}; NOT enforced here: ${missing.join(' and ')} (no cgroup can be made for them: run as root, ` +
    'or with a delegated cgroup v2 subtree, e.g. under systemd-run --user --scope -p Delegate=yes; an app ' +
    `can then use all of this machine's ${missing.join(' and ')})`
  );
}

/** A sandbox's cgroups: the files its first process joins, what it hit, and their removal. */
export class SandboxCgroups {
  private readonly dirs: { c: Controller; dir: string; version: 1 | 2 }[] = [];

  constructor(name: string, limits: SandboxLimits) {
    for (const c of ['memory', 'pids'] as Controller[]) {
      const b = base(c);
      if (!b) continue;
      const dir = join(b.dir, name);
      // v2: one cgroup holds both controllers.
      if (this.dirs.some((d) => d.dir === dir)) {
        this.dirs.push({ c, dir, version: b.version });
        this.limit(c, dir, b.version, limits);
        continue;
      }
      try {
        mkdirSync(dir);
        this.dirs.push({ c, dir, version: b.version });
        this.limit(c, dir, b.version, limits);
      } catch {
        // Made by the probe but not now (permissions changed): that limit is not enforced for this one.
      }
    }
  }

  private limit(c: Controller, dir: string, version: 1 | 2, limits: SandboxLimits) {
    if (c === 'pids') return writeFileSync(join(dir, 'pids.max'), String(limits.processes));
    const bytes = String(limits.memoryMiB * 1024 * 1024);
    writeFileSync(join(dir, limitFile('memory', version)), bytes);
    // No swapping past the limit either, where the kernel accounts swap.
    const swap = version === 1 ? 'memory.memsw.limit_in_bytes' : 'memory.swap.max';
    try {
      writeFileSync(join(dir, swap), version === 1 ? bytes : '0');
    } catch {}
  }

  /** The `cgroup.procs` files the sandbox's first process writes its pid to before anything else runs. */
  procsFiles(): string[] {
    return [...new Set(this.dirs.map((d) => join(d.dir, 'cgroup.procs')))];
  }

  /** Which limit the sandbox hit, if any: the kernel's counts of OOM kills and refused forks. */
  hit(): LimitHit | undefined {
    for (const { c, dir, version } of this.dirs) {
      if (c === 'memory') {
        const events = readOr(join(dir, version === 1 ? 'memory.oom_control' : 'memory.events'));
        if (Number(/^oom_kill (\d+)/m.exec(events)?.[1] ?? 0) > 0) return 'memory';
      } else if (Number(/^max (\d+)/m.exec(readOr(join(dir, 'pids.events')))?.[1] ?? 0) > 0)
        return 'processes';
    }
    return undefined;
  }

  /**
   * Remove the cgroups once their processes are gone: a killed process leaves its cgroup only once it
   * is reaped, so a busy one is tried again for a few seconds (then left to `sweepSandboxCgroups`).
   */
  remove(): void {
    const left = new Set(this.dirs.map((d) => d.dir));
    const attempt = (tries: number) => {
      for (const dir of [...left]) {
        // Whatever of the sandbox is still there, even a process that left its process group (setsid).
        for (const pid of readOr(join(dir, 'cgroup.procs')).split('\n').filter(Boolean)) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {}
        }
        try {
          rmdirSync(dir);
          left.delete(dir);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') left.delete(dir);
        }
      }
      if (left.size > 0 && tries > 0) setTimeout(() => attempt(tries - 1), 100).unref();
    };
    attempt(50);
  }
}

/** Remove the empty sandbox cgroups a crash left (at the runtime's recovery). */
export function sweepSandboxCgroups(): void {
  for (const c of ['memory', 'pids'] as Controller[]) {
    const b = base(c);
    if (!b) continue;
    let entries: string[] = [];
    try {
      entries = readdirSync(b.dir).filter((e) => e.startsWith(SANDBOX_CGROUP_PREFIX));
    } catch {}
    for (const e of entries) {
      try {
        rmdirSync(join(b.dir, e));
      } catch {
        // Still has processes (killed by recovery a moment ago, not yet reaped): the next start sweeps.
      }
    }
  }
}

/** The name of every sandbox cgroup starts with this. */
export const SANDBOX_CGROUP_PREFIX = 'preview-sandbox-';

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/**
 * The shell script that joins the cgroups (`"$@"` up to `--` are `cgroup.procs` files), sets the file size
 * limit and then becomes the sandbox (the rest of `"$@"`): the same process, so the process group, the
 * owner marker in its environment and the pid the runtime recorded stay the sandbox's.
 */
export function limitedLaunchScript(limits: SandboxLimits): string {
  const blocks = limits.fileMiB * 2048; // `ulimit -f` counts 512-byte blocks
  return (
    `ulimit -f ${blocks} || exit 125; ` +
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
  );
}

/** What a sandbox that ended hit, as the failure says it (`app web exceeded its memory limit (512 MiB)`). */
export function limitMessage(
  who: string,
  limits: SandboxLimits,
  hit: LimitHit | undefined,
  exit: string,
  output: string,
): string | undefined {
  if (hit === 'memory') return `${who} exceeded its memory limit (${limits.memoryMiB} MiB)`;
  if (hit === 'processes') return `${who} exceeded its process limit (${limits.processes} processes)`;
  if (hit === 'disk') return `${who} exceeded its disk limit (${limits.diskMiB} MiB in its working copy)`;
  // SIGXFSZ: the process itself (`signal SIGXFSZ`), or a shell's message about its command.
  if (exit === 'signal SIGXFSZ' || /\bEFBIG\b|File too large|File size limit exceeded/.test(output))
    return `${who} exceeded its file size limit (${limits.fileMiB} MiB per file)`;
  if (/\bENOSPC\b|No space left on device/.test(output))
    return `${who} ran out of space: its /tmp holds at most ${limits.tmpMiB} MiB`;
  return undefined;
}

/**
 * The working copies of running sandboxes, measured every `everyMs` with `du` (off the event loop, one at a
 * time); one past `limitMiB` is reported to `over` (which kills it) once.
 */
export class DiskWatch {
  private readonly watched = new Map<number, string>();
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(
    private readonly limitMiB: number,
    private readonly over: (pid: number) => void,
    private readonly everyMs = 30_000,
  ) {}

  /** Watch the working copy `dir` of the sandbox whose leader is `pid`. */
  add(pid: number, dir: string): void {
    this.watched.set(pid, dir);
    this.timer ??= setInterval(() => void this.tick(), this.everyMs).unref();
  }

  delete(pid: number): void {
    this.watched.delete(pid);
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private async tick() {
    if (this.busy) return;
    this.busy = true;
    try {
      for (const [pid, dir] of [...this.watched]) {
        const kib = await diskUsageKiB(dir);
        if (kib !== undefined && kib > this.limitMiB * 1024 && this.watched.get(pid) === dir) {
          this.watched.delete(pid);
          this.over(pid);
        }
      }
    } finally {
      this.busy = false;
    }
  }
}

/** `du -sk` of `dir` (its blocks on disk, one filesystem, links not followed); undefined if it failed. */
function diskUsageKiB(dir: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    execFile('du', ['-skx', dir], { timeout: 60_000 }, (_err, stdout) => {
      const kib = Number(/^(\d+)/.exec(stdout ?? '')?.[1]);
      resolve(Number.isFinite(kib) ? kib : undefined);
    });
  });
}
