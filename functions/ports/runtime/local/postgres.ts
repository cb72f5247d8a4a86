import { spawnSync } from 'node:child_process';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/*
 * Postgres for the local runtime's services, from Debian's packages (`postgresql`: one major per release,
 * its binaries under /usr/lib/postgresql/<major>/bin). What a service directory holds: `cluster/` (the
 * data directory) and `server.log`; its Unix socket, which only this server reaches (the runtime's
 * readiness check and `from: main` copies), is in a short directory of its own (services.ts `socketDir`).
 *
 * Fast to create: `initdb` takes a second or two, so it runs once per major into a pristine template
 * cluster under the data dir (`templates/postgres-<major>`), and a new service is a plain copy of it
 * (postgres-copy.ts `copyCluster`: each service's files are its own) with its password set in
 * single-user mode. A copy of the main branch's database is a file-level copy of main's running server
 * through Postgres's low-level backup API (postgres-copy.ts): consistent while main keeps serving, and
 * several times faster than a dump and restore. Durability is traded for speed, as fits a disposable
 * preview: `fsync`, `synchronous_commit` and `full_page_writes` are off (a crash of this machine may
 * lose a preview's last writes, or its database).
 */

/** The role and database every service's clients use. */
export const PG_USER = 'preview';
export const PG_DATABASE = 'preview';

/** The majors installed here, highest first. */
export function installedMajors(root = '/usr/lib/postgresql'): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((d) => /^\d+$/.test(d) && existsSync(join(root, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
}

/** The major that serves a declared version: the same if installed, else the highest installed. */
export function servingMajor(declared: string): string | undefined {
  const majors = installedMajors();
  return majors.includes(declared) ? declared : majors[0];
}

export const pgBin = (major: string, tool: string) => `/usr/lib/postgresql/${major}/bin/${tool}`;

/** Settings every service's server starts with (on its command line, so a copy of main's takes them too). */
export function serverArgs(dir: string, sockDir: string, major: string, port: number): string[] {
  return [
    pgBin(major, 'postgres'),
    '-D',
    join(dir, 'cluster'),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `port=${port}`,
    '-c',
    `unix_socket_directories=${sockDir}`,
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
    '-c',
    'shared_buffers=16MB',
    '-c',
    'max_connections=40',
    '-c',
    'logging_collector=off',
  ];
}

/**
 * The verifier Postgres stores for a SCRAM-SHA-256 password (RFC 5802, 7677): the password itself never
 * reaches the server, so no log or error of it can hold it.
 */
export function scramVerifier(password: string, iterations = 4096, salt = randomBytes(16)): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest('base64');
  const serverKey = createHmac('sha256', salted).update('Server Key').digest('base64');
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey}:${serverKey}`;
}

/** How a command of a service runs: the argv a wrapper (sandbox, namespace) makes of the server's own. */
export type Wrap = (dir: string, argv: string[]) => { command: string; args: string[] };

/** Run `argv` wrapped to the end with `input` on stdin; throws with the end of its output on a failure. */
export function runWrapped(wrap: Wrap, dir: string, argv: string[], input?: string): void {
  const { command, args } = wrap(dir, argv);
  const out = spawnSync(command, args, { input, encoding: 'utf8', timeout: 60_000 });
  if (out.error || out.status !== 0) {
    const tail = `${out.stdout ?? ''}${out.stderr ?? ''}`.trim().split('\n').slice(-3).join(' | ');
    throw new Error(
      `${argv[0]!.split('/').pop()} failed (${out.error?.message ?? `exit code ${out.status}`}): ${tail}`,
    );
  }
}

/**
 * The pristine cluster of `major` under `templates` (made on first use: `initdb`, then the `preview`
 * database), returned as its directory. Made aside and renamed into place, so a half-made one never counts.
 */
export function ensureTemplate(wrap: Wrap, templates: string, major: string): string {
  const done = join(templates, `postgres-${major}`);
  if (existsSync(join(done, 'cluster', 'PG_VERSION'))) return done;
  const making = `${done}.${process.pid}.making`;
  rmSync(making, { recursive: true, force: true });
  mkdirSync(making, { recursive: true, mode: 0o700 });
  runWrapped(wrap, making, [
    pgBin(major, 'initdb'),
    '-D',
    join(making, 'cluster'),
    '-U',
    PG_USER,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
    '--no-instructions',
  ]);
  runWrapped(
    wrap,
    making,
    [pgBin(major, 'postgres'), '--single', '-D', join(making, 'cluster'), '-c', 'fsync=off', 'postgres'],
    `CREATE DATABASE ${PG_DATABASE};\n`,
  );
  rmSync(done, { recursive: true, force: true });
  renameSync(making, done);
  return done;
}

/** Set the password of a service's role (before its server starts): single-user mode, a verifier only. */
export function setPassword(wrap: Wrap, dir: string, major: string, password: string): void {
  runWrapped(
    wrap,
    dir,
    [pgBin(major, 'postgres'), '--single', '-D', join(dir, 'cluster'), '-c', 'fsync=off', PG_DATABASE],
    `ALTER ROLE ${PG_USER} PASSWORD '${scramVerifier(password)}';\n`,
  );
}

/** Whether the server at the socket directory accepts connections (`pg_isready`). */
export function pgReady(major: string, sockDir: string, port: number): boolean {
  const out = spawnSync(
    pgBin(major, 'pg_isready'),
    ['-q', '-h', sockDir, '-p', String(port), '-U', PG_USER, '-d', PG_DATABASE],
    { stdio: 'ignore', timeout: 5_000 },
  );
  return out.status === 0;
}
