import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * A network namespace per preview environment for the local runtime, connected by pasta (Debian package
 * `passt`): all apps of an environment (and its builds) share it, so siblings reach each other over
 * `127.0.0.1` as before, while other environments, the control plane and every listener of this machine
 * are out of reach: pasta runs with
 *
 * - `-T none -U none`: no port of the host is forwarded into the namespace (pasta's default would make
 *   the host's listeners answer on the namespace's own loopback);
 * - `--no-map-gw`: the gateway address is not mapped to the host's loopback either;
 * - `-t 127.0.0.1/<port>` per app: the host reaches each app's port on its own loopback, and only there
 *   (the runtime's URL `http://127.0.0.1:<port>`);
 * - its NAT for the rest: outbound connections (a build's `npm install`) work as from this machine.
 *
 * The namespace is made with `unshare --net=<file>` (bound to a file under the data dir) and entered with
 * `nsenter --net=<file>`; both need root, as does pasta joining it (`--runas 0:0`: pasta otherwise becomes
 * `nobody`, who may not join a namespace of root's). Without root (or without pasta) the network stays
 * shared, and `npm start` says so. pasta's forwards are fixed when it starts: when an environment's set
 * of ports changes, its pasta is restarted (a connection open through it then is cut).
 */

let usable: boolean | undefined;
/** Whether namespaces per environment work here (root, pasta, unshare, nsenter): probed once. */
export function networkIsolationUsable(scratch: string): boolean {
  usable ??= probe(scratch);
  return usable;
}

function probe(scratch: string): boolean {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false;
  const path = join(scratch, `probe-${process.pid}`);
  try {
    createNetns(path);
    const pid = startPasta(path, []);
    void stopPasta(pid);
    return true;
  } catch {
    return false;
  } finally {
    removeNetns(path);
  }
}

/** Make a network namespace bound to `path` (a file; its directory is created). */
export function createNetns(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  if (isNetns(path)) return;
  writeFileSync(path, '', { mode: 0o600 });
  const made = spawnSync('unshare', [`--net=${path}`, 'true'], { stdio: 'ignore', timeout: 10_000 });
  if (made.error || made.status !== 0)
    throw new Error('could not create a network namespace (unshare --net)');
}

/** Whether `path` is a bound network namespace (a mount point: its device differs from its directory's). */
function isNetns(path: string): boolean {
  try {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    return mounts.split('\n').some((l) => l.split(' ')[4] === path);
  } catch {
    return false;
  }
}

/** Unbind and remove a namespace file (nothing when it is not there). */
export function removeNetns(path: string): void {
  // Lazily: pasta may still hold it for a moment after its SIGTERM (a plain umount is then busy).
  if (isNetns(path)) spawnSync('umount', ['--lazy', path], { stdio: 'ignore', timeout: 10_000 });
  rmSync(path, { force: true });
}

/**
 * Start pasta on the namespace at `path`, forwarding the host's `127.0.0.1:<port>` to the namespace's for
 * each of `ports`; returns its pid (it runs in the background). Throws when it did not start.
 */
export function startPasta(path: string, ports: number[]): number {
  const pidFile = `${path}.pasta.pid`;
  rmSync(pidFile, { force: true });
  const forwards = ports.length ? ports.flatMap((p) => ['-t', `127.0.0.1/${p}`]) : ['-t', 'none'];
  const args = [
    '--config-net',
    '--no-map-gw',
    '-T',
    'none',
    '-U',
    'none',
    '-u',
    'none',
    ...forwards,
    '--runas',
    '0:0',
    '--quiet',
    '--netns',
    path,
    '--pid',
    pidFile,
  ];
  const run = spawnSync('pasta', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
  const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : Number.NaN;
  rmSync(pidFile, { force: true });
  if (run.error || run.status !== 0 || !Number.isInteger(pid) || pid <= 0) {
    const said = (run.stderr?.toString() ?? '').split('\n').find((l) => l && !/syslog/.test(l));
    throw new Error(`pasta did not start${said ? `: ${said.slice(0, 200)}` : ''}`);
  }
  return pid;
}

/**
 * Stop a pasta this runtime started (its pid, checked to still be pasta's); resolves once it is gone (a
 * new pasta on the same namespace cannot make its tap device while the old one holds it), at most after
 * a SIGKILL.
 */
export async function stopPasta(pid: number | undefined): Promise<void> {
  if (!pid || !isPasta(pid)) return;
  for (const [signal, waitMs] of [
    ['SIGTERM', 2_000],
    ['SIGKILL', 2_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    for (const end = Date.now() + waitMs; Date.now() < end; ) {
      if (!isPasta(pid)) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/**
 * Whether `pid` is a live pasta process (Debian's runs as `passt.avx2` or `passt`). One that exited but
 * is not reaped yet (a zombie: its parent is init, which may take its time) counts as gone.
 */
export function isPasta(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return /^(pasta|passt)/.test(comm) && state !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Whether something listens on `port` in the namespace bound at `netns`, read from process `pid`'s
 * `/proc/<pid>/net` (through pasta, the host's side of a forward accepts a connection even when nothing
 * listens inside). False while `pid` is not in that namespace yet (the shell that joins it has not
 * exec'd nsenter): its table would be the host's, where pasta itself listens on the port.
 */
export function listeningInside(pid: number, port: number, netns: string): boolean {
  try {
    if (readlinkSync(`/proc/${pid}/ns/net`) !== `net:[${statSync(netns).ino}]`) return false;
  } catch {
    return false;
  }
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['tcp', 'tcp6']) {
    let table = '';
    try {
      table = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of table.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state === '0A' && local?.endsWith(`:${hex}`)) return true;
    }
  }
  return false;
}
