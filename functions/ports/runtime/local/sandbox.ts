import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';

/**
 * Isolation of the local runtime's builds and apps with bubblewrap (`bwrap`, Debian package
 * `bubblewrap`). Each command runs in its own PID, IPC, UTS (and, where possible, cgroup) namespace with
 * every capability dropped, in a root that holds only an allowlist:
 *
 * - `/usr` and `/etc` read-only (with `/bin`, `/lib`... as on the host: links into `/usr` or read-only
 *   binds), plus the prefix of the node and git installs when they live elsewhere (nvm, a tool cache);
 * - a fresh `/dev`, a `/proc` of its own PID namespace (no other process, no other process's environment),
 *   an empty `/tmp` and an empty home;
 * - its own working copy, the only thing it can write.
 *
 * So the data dir (credentials, secrets key, database), the project, other environments' working copies
 * and the host's `/tmp` do not exist inside. `--cap-drop ALL` matters where the server runs as root:
 * with capabilities a sandbox could unmount the tmpfs over `/tmp` and see what it hides. bwrap makes no
 * network namespace: where the runtime gives each environment one (local/network.ts), the sandbox is
 * started inside it (all apps of an environment share it); elsewhere the network is this machine's.
 *
 * No `--new-session`: the runtime stops an app by signalling its process group, which bwrap (spawned
 * detached, so the group's leader) shares with everything inside. Builds get `--die-with-parent` (nothing
 * of a build outlives the server); apps don't, so a stop can be graceful (SIGTERM first).
 */

export type Isolation = 'bwrap' | 'none';

/** The home directory inside a sandbox: empty, writable, gone when the sandbox ends. */
export const SANDBOX_HOME = '/home/sandbox';

let usable: boolean | undefined;
/**
 * Whether bubblewrap works here: probed once per process by running a minimal sandbox with the options
 * the runtime needs (a missing `bwrap`, a kernel or policy that forbids the namespaces: false).
 */
export function bubblewrapUsable(): boolean {
  usable ??= probe();
  return usable;
}

function probe(): boolean {
  if (process.platform !== 'linux') return false;
  const result = spawnSync(
    'bwrap',
    ['--unshare-pid', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--proc', '/proc', '--dev', '/dev', 'true'],
    { stdio: 'ignore', timeout: 10_000 },
  );
  return !result.error && result.status === 0;
}

let hostBinds: string[] | undefined;
/** The read-only system part of every sandbox (computed once: it depends on the host only). */
function systemBinds(): string[] {
  if (hostBinds) return hostBinds;
  const args = ['--ro-bind', '/usr', '/usr', '--ro-bind', '/etc', '/etc'];
  // The password hashes of this machine's users stay out of reach (the sandbox may well run as root).
  for (const file of ['/etc/shadow', '/etc/gshadow', '/etc/shadow-', '/etc/gshadow-'])
    if (lstatOrUndefined(file)) args.push('--ro-bind', '/dev/null', file);
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    const stat = lstatOrUndefined(top);
    if (stat?.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else if (stat?.isDirectory()) args.push('--ro-bind', top, top);
  }
  args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp');
  // A resolv.conf that links out of /etc (systemd-resolved: /run/...) is bound where it points.
  const resolv = realpathOrUndefined('/etc/resolv.conf');
  if (resolv && !isUnder(resolv, '/etc') && !isUnder(resolv, '/usr')) args.push('--ro-bind', resolv, resolv);
  hostBinds = args;
  return args;
}

/**
 * Read-only binds of the node and git installs when they live outside /usr (nvm, a CI tool cache): their
 * prefix (`/opt/node` for `/opt/node/bin/node`), or only the binary's own directory when the prefix would
 * hold one of `hidden` (a node in `~/bin` must not bring the home, and a data dir in it, along). After
 * the tmpfs on /tmp, so a toolchain installed under /tmp is bound over it, not hidden by it.
 */
function toolchainBinds(hidden: string[]): string[] {
  const dirs = new Set<string>();
  for (const binary of [process.execPath, onPath('git')]) {
    const real = binary && realpathOrUndefined(binary);
    const dir = real && toolchainDir(real, hidden);
    if (dir) dirs.add(dir);
  }
  return [...dirs].flatMap((d) => ['--ro-bind', d, d]);
}

/** What to bind for a tool whose binary really is `binary` (see `toolchainBinds`); undefined: nothing. */
export function toolchainDir(binary: string, hidden: string[]): string | undefined {
  if (isUnder(binary, '/usr')) return undefined;
  return [dirname(dirname(binary)), dirname(binary)].find(
    (d) => d !== '/' && !hidden.some((h) => isUnder(h, d)),
  );
}

/**
 * The `bwrap` argument list that runs `command` with `/bin/sh -c` in `workDir` (which must exist), seeing
 * and writing only that directory. `build`: the sandbox dies with the server. `hidden`: directories no
 * bind may bring in (the data dir, the root of all working copies).
 */
export function bubblewrapArgs(
  command: string,
  workDir: string,
  opts: { build: boolean; hidden: string[]; tmpMiB?: number },
): string[] {
  // The real path: a link in the path could point somewhere else inside the sandbox's root.
  const work = realpathSync(workDir);
  const system = [...systemBinds()];
  // The sandbox's /tmp is memory: its size is limited (a write past it fails with ENOSPC).
  if (opts.tmpMiB !== undefined)
    system.splice(system.indexOf('--tmpfs'), 0, '--size', String(opts.tmpMiB * 1024 * 1024));
  return [
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--cap-drop',
    'ALL',
    ...system,
    ...toolchainBinds(opts.hidden),
    // bwrap creates the path's parents (in its root tmpfs, or the /tmp one): they are empty.
    '--bind',
    work,
    work,
    '--dir',
    SANDBOX_HOME,
    '--chdir',
    work,
    ...(opts.build ? ['--die-with-parent'] : []),
    '--',
    '/bin/sh',
    '-c',
    command,
  ];
}

/** The uid (and gid) a service runs as inside its sandbox: `nobody`, which every Debian system has. */
export const SERVICE_UID = 65534;

/**
 * The `bwrap` argument list that runs a database server (`argv`, no shell) seeing the system part and
 * `dir` only (read-write), and `extra` (its socket directory: read-write, at the same path), as an
 * unprivileged user: a user namespace maps `SERVICE_UID` inside to the server's own uid outside, so
 * Postgres (which refuses root) runs while its files stay the server's.
 */
export function serviceSandboxArgs(dir: string, argv: string[], extra: string[] = []): string[] {
  const real = realpathSync(dir);
  // After the system binds: a directory under /tmp is bound over the sandbox's empty /tmp.
  const binds = extra.flatMap((d) => ['--bind', realpathSync(d), d]);
  return [
    '--unshare-user',
    '--uid',
    String(SERVICE_UID),
    '--gid',
    String(SERVICE_UID),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--cap-drop',
    'ALL',
    ...systemBinds(),
    '--bind',
    real,
    real,
    ...binds,
    '--chdir',
    real,
    '--',
    ...argv,
  ];
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

const isUnder = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);

function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The live members of process group `pgid` (zombies don't count), with their command names. Linux: read
 * from /proc; elsewhere (or without /proc) none are known.
 */
export function liveGroupMembers(pgid: number): { pid: number; comm: string }[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  const members: { pid: number; comm: string }[] = [];
  for (const pid of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses: read after the last `)`.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z')
      members.push({ pid: Number(pid), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
  }
  return members;
}
