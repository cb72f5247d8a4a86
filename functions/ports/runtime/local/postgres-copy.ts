import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { PG_DATABASE, PG_USER, pgBin } from './postgres.js';

/*
 * `from: main`: a file-level copy of the main branch's running Postgres, through Postgres's own low-level
 * backup API (the documented "base backup using the low level API"), in one psql session on main's socket:
 *
 * 1. a temporary physical replication slot, reserving WAL from now: no checkpoint of main's can recycle a
 *    segment the copy needs before it is copied (the slot goes with the session);
 * 2. `pg_backup_start(label, fast)`: a fast checkpoint, the copy's redo point;
 * 3. main's data directory copied by a few `cp` at once (the kernel's copy_file_range), onto the spare
 *    when one is ready (below), leaving out what the backup docs say to leave out (pg_wal's contents,
 *    postmaster.pid/opts, pg_replslot, the temporary dirs);
 * 4. `pg_backup_stop(false)`: the backup label and the stop position; the label is written into the copy
 *    and the WAL segments from the start's to the stop's copied into its pg_wal.
 *
 * The copy's first start replays that WAL up to the backup's end: consistent while main keeps serving.
 * Chosen over `pg_basebackup` (the same backup, streamed as tar through the replication protocol and
 * written by one client process: about 2× slower here, `npm run bench:services`) and over a template
 * database (a preview's Postgres is a server of its own, in its own sandbox). Main's files are read by
 * this process, as pg_basebackup's client read them before: main's server is never paused.
 */

/** Entries of a data directory a copy leaves out: contents of these directories (kept empty)… */
const EMPTY_DIRS = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_stat_tmp',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_subtrans',
]);
/** …and these files. */
const SKIP_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map']);

/** One psql session: each `ask` sends one statement and resolves with the one line it prints. */
function session(major: string, sockDir: string, port: number) {
  const args = ['-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-F', '|'];
  args.push('-h', sockDir, '-p', String(port), '-U', PG_USER, '-d', PG_DATABASE);
  const child = spawn(pgBin(major, 'psql'), args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiting: Array<{ resolve: (line: string) => void; reject: (e: Error) => void }> = [];
  const fail = (e: Error) => {
    for (const w of waiting.splice(0)) w.reject(e);
  };
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (let nl = out.indexOf('\n'); nl >= 0 && waiting.length; nl = out.indexOf('\n')) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      waiting.shift()!.resolve(line);
    }
  });
  child.stderr.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-2_000);
  });
  child.once('error', fail);
  child.once('exit', (code) =>
    fail(new Error(`psql on main's server ended (exit code ${code}): ${err.trim().split('\n').pop()}`)),
  );
  return {
    ask: (sql: string) =>
      new Promise<string>((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${sql}\n`);
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.stdin.end();
      }),
  };
}

/**
 * A data directory copied to `to` (`asBackup`: minus what a base backup leaves out). When `to` already
 * holds a cluster (a spare, below), the copy goes onto it: same-named files are overwritten in place and
 * whatever the source lacks is removed, so the result is the source's files and nothing else. Files are
 * split by directory into chunks copied by a few `cp` at once (the data itself goes by copy_file_range; no
 * reflink or hard link, each copy's files are its own). Files keep their 0600 and directories are made
 * 0700, as Postgres checks (Node 22's `cpSync` made them with the default mode).
 */
export async function copyCluster(from: string, to: string, asBackup = false): Promise<void> {
  const chunks: Array<{ dir: string; files: string[] }> = [];
  const walk = (src: string, dst: string, top: boolean) => {
    const stale = existsSync(dst) ? new Set(readdirSync(dst)) : undefined;
    if (!stale) mkdirSync(dst, { mode: 0o700 });
    const files: string[] = [];
    for (const e of readdirSync(src, { withFileTypes: true })) {
      if (asBackup && top && EMPTY_DIRS.has(e.name)) {
        rmSync(join(dst, e.name), { recursive: true, force: true });
        mkdirSync(join(dst, e.name), { mode: 0o700 });
      } else if (e.isDirectory()) {
        if (asBackup && e.name.startsWith('pgsql_tmp')) continue;
        walk(join(src, e.name), join(dst, e.name), false);
      } else if (asBackup && top && SKIP_FILES.has(e.name)) continue;
      else files.push(join(src, e.name));
      stale?.delete(e.name);
    }
    for (const name of stale ?? []) rmSync(join(dst, name), { recursive: true, force: true });
    for (let i = 0; i < files.length; i += CHUNK) chunks.push({ dir: dst, files: files.slice(i, i + CHUNK) });
  };
  walk(from, to, true);
  const copyChunk = ({ dir, files }: { dir: string; files: string[] }) =>
    new Promise<void>((resolve, reject) => {
      const cp = spawn('cp', ['-t', dir, ...files], { stdio: ['ignore', 'ignore', 'pipe'] });
      copying.add(cp);
      cp.once('close', () => copying.delete(cp));
      let err = '';
      cp.stderr.on('data', (d: Buffer) => {
        err = (err + d.toString()).slice(-1_000);
      });
      cp.once('error', reject);
      cp.once('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`copying a cluster failed: ${err.trim()}`)),
      );
    });
  let next = 0;
  const worker = async () => {
    while (next < chunks.length) await copyChunk(chunks[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(COPIERS, chunks.length) }, worker));
}

/**
 * The `cp` running: killed if this process exits first (a spare being made must not outlive it). One set
 * per process, however many times this module is loaded (a test runner loads it once per file).
 */
const COPYING = Symbol.for('preview.postgres-copy.copying');
const shared = globalThis as { [COPYING]?: Set<ChildProcess> };
if (!shared[COPYING]) {
  const set = new Set<ChildProcess>();
  process.once('exit', () => {
    for (const cp of set) cp.kill('SIGKILL');
  });
  shared[COPYING] = set;
}
const copying = shared[COPYING];

/** Files per `cp`, and how many run at once. */
const CHUNK = 100;
const COPIERS = Math.max(2, Math.min(4, availableParallelism()));

/**
 * A new service's cluster (`<dir>/cluster`) copied from main's running server: `mainData` its data
 * directory, reached at its socket directory and port. Resolves once the copy is whole.
 */
export async function copyFromServer(
  major: string,
  sockDir: string,
  port: number,
  mainData: string,
  dir: string,
): Promise<void> {
  const psql = session(major, sockDir, port);
  try {
    const newApi = Number(major) >= 15;
    await psql.ask(
      `SELECT 1 FROM pg_create_physical_replication_slot('preview_copy_${randomBytes(6).toString('hex')}', true, true);`,
    );
    const startWal = await psql.ask(
      newApi
        ? "SELECT pg_walfile_name(pg_backup_start('preview copy', true));"
        : "SELECT pg_walfile_name(pg_start_backup('preview copy', true, false));",
    );
    const cluster = join(dir, 'cluster');
    await copyCluster(mainData, cluster, true);
    const stop = await psql.ask(
      `SELECT pg_walfile_name(lsn), encode(convert_to(labelfile, 'UTF8'), 'hex'), encode(convert_to(coalesce(spcmapfile, ''), 'UTF8'), 'hex') FROM ${newApi ? 'pg_backup_stop(false)' : 'pg_stop_backup(false, false)'};`,
    );
    const [stopWal, label, spcmap] = stop.split('|');
    if (!/^[0-9A-F]{24}$/.test(startWal) || !/^[0-9A-F]{24}$/.test(stopWal ?? '') || !label)
      throw new Error(`unexpected answer from main's server: ${startWal} / ${stopWal}`);
    writeFileSync(join(cluster, 'backup_label'), Buffer.from(label, 'hex'), { mode: 0o600 });
    if (spcmap) writeFileSync(join(cluster, 'tablespace_map'), Buffer.from(spcmap, 'hex'), { mode: 0o600 });
    // The segments from the start's to the stop's (their names order as the WAL does on one timeline),
    // and any timeline history: the slot kept them all in main's pg_wal.
    const wal = readdirSync(join(mainData, 'pg_wal')).filter(
      (f) => (/^[0-9A-F]{24}$/.test(f) && f >= startWal && f <= stopWal!) || f.endsWith('.history'),
    );
    if (!wal.includes(startWal)) throw new Error(`main's WAL segment ${startWal} is gone`);
    const walDir = join(cluster, 'pg_wal');
    mkdirSync(join(walDir, 'archive_status'), { mode: 0o700 });
    const cp = spawnSync('cp', ['-t', walDir, ...wal.map((f) => join(mainData, 'pg_wal', f))], {
      encoding: 'utf8',
    });
    if (cp.status !== 0) throw new Error(`copying main's WAL failed: ${cp.stderr.trim()}`);
  } finally {
    await psql.close();
  }
}

/*
 * Spares. What a copy costs is mostly creating its files (some 1,200 inodes; on a busy disk that alone
 * takes most of a second), while overwriting files that exist costs a tenth of that. So one spare copy
 * of each major's template cluster is kept ready beside it (`<template>.spare`): a new service takes it
 * by a rename (an empty service is then made), `from: main` copies main's files onto it (most names are
 * the template's: main was made from it), and a new spare is made in the background for the next one. A
 * spare holds the pristine template only: nobody's data, no password.
 */

const refills = new Map<string, Promise<void>>();

/** Move the spare of `template` to `cluster`, if one is ready: true when taken. */
export function takeSpare(template: string, cluster: string): boolean {
  try {
    renameSync(`${template}.spare`, cluster);
    return true;
  } catch {
    return false;
  }
}

/** Make the spare of `template` in the background, unless one is ready or being made. */
export function refillSpare(template: string): void {
  const spare = `${template}.spare`;
  if (refills.has(template) || existsSync(spare)) return;
  const making = `${spare}.making`;
  const made = (async () => {
    rmSync(making, { recursive: true, force: true });
    await copyCluster(join(template, 'cluster'), making);
    renameSync(making, spare);
  })()
    // A spare that could not be made (the data dir going away, a full disk): the next copy is a plain one.
    .catch(() => rmSync(making, { recursive: true, force: true }))
    .finally(() => refills.delete(template));
  refills.set(template, made);
}

/** Resolves once no spare is being made (the bench and tests wait on it, as two deploys are apart). */
export async function sparesSettled(): Promise<void> {
  while (refills.size) await Promise.all(refills.values());
}
