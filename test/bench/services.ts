/**
 * `npm run bench:services`: how fast the local runtime provides a preview's Postgres (services.ts), with
 * Debian's postgresql, the way a deploy does it (`ensureServices`, in this process, no sandbox network
 * namespace: the servers run in their bubblewrap sandbox as uid 65534 when bubblewrap is usable).
 *
 * - an empty Postgres: from asking to accepting connections (a copy of the template cluster, its password
 *   set, the server started), median of 5; the template's one-time `initdb` is measured apart;
 * - a seeded one: the same plus a seed of 1,000 rows through psql;
 * - `from: main` of a 10 MB and a 100 MB main database (a file-level copy of main's running server through
 *   Postgres's low-level backup API, postgres-copy.ts), each beside `pg_dump -Fc | pg_restore` of the same
 *   database into an empty service, measured in the same run: three rounds alternating, medians.
 *
 * Each creation is timed from a moment when no spare cluster is being made (postgres-copy.ts: one ready
 * copy of the template is kept, made in the background after each creation), as two deploys are apart;
 * the 100 MB copy with no spare ready is printed beside it.
 *
 * The copy's time counts everything a deploy waits for (the copy, its password, its server started and
 * accepting connections); the reference's counts the dump and restore only (its empty target service is
 * made before the clock starts), so the ratio leans against the copy.
 *
 * Targets: an empty Postgres ready in ≤ 3 s; the 100 MB copy ≥ 3× faster than dump and restore.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { pgBin } from '../../functions/ports/runtime/local/postgres.js';
import { sparesSettled } from '../../functions/ports/runtime/local/postgres-copy.js';
import { servicesRoot } from '../../functions/ports/runtime/local/services.js';
import type { RuntimeTarget } from '../../functions/ports/runtime/port.js';
import { localPostgres } from '../support/local-services.js';
import { reportFigure } from './report.js';

const services = localPostgres('bench', 'acme/bench');
const { rt, target, drop, where } = services;

/** A deploy's creation of the service, timed from a moment when no spare is being made (deploys are apart). */
async function provide(t: RuntimeTarget, from?: 'main'): Promise<number> {
  await sparesSettled();
  return timed(() => services.provide(t, from));
}
const timed = async (f: () => Promise<unknown>) => {
  const started = performance.now();
  await f();
  return performance.now() - started;
};

/** psql as the server's own superuser over its socket (trust), the SQL on stdin. */
function psql(t: RuntimeTarget, input: string, args: string[] = []) {
  const { sock, port } = where(t);
  const out = spawnSync(
    'psql',
    [
      '-X',
      '-q',
      '-v',
      'ON_ERROR_STOP=1',
      '-h',
      sock,
      '-p',
      String(port),
      '-U',
      'preview',
      '-d',
      'preview',
      ...args,
    ],
    { input, encoding: 'utf8' },
  );
  if (out.status !== 0) throw new Error(`psql failed: ${out.stderr}`);
  return { out: out.stdout.trim(), sock, port };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  try {
    const templateMs = await provide(target(100));
    await drop(target(100));
    console.log(`template cluster (initdb, once per major): ${templateMs.toFixed(0)} ms`);

    const empty: number[] = [];
    const seeded: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = target(200 + i);
      empty.push(await provide(t));
      const seedStart = performance.now();
      psql(
        t,
        'CREATE TABLE items (id int, body text); INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 1000) g;',
      );
      seeded.push(empty.at(-1)! + performance.now() - seedStart);
      await drop(t);
    }
    console.log(`empty postgres ready: ${empty.map((m) => m.toFixed(0)).join(', ')} ms`);
    reportFigure({
      name: 'services: empty postgres ready',
      measured: Number((median(empty) / 1000).toFixed(2)),
      target: '≤ 3 s',
      ok: median(empty) <= 3000,
      unit: 's',
      detail: `median of 5; seeded (1,000 rows) ${median(seeded).toFixed(0)} ms`,
    });
    reportFigure({
      name: 'services: seeded postgres ready',
      measured: Number((median(seeded) / 1000).toFixed(2)),
      target: 'context',
      ok: true,
      unit: 's',
      informational: true,
    });

    for (const mb of [10, 100]) {
      const mainT = target(0);
      await provide(mainT);
      // ~1 KB per row (a 1,000-character text column, uncompressible md5s), so rows ≈ MB × 1,000.
      psql(
        mainT,
        `CREATE TABLE blobs (id int, body text); INSERT INTO blobs SELECT g, repeat(md5(g::text), 31) FROM generate_series(1, ${mb * 1000}) g; CHECKPOINT;`,
      );
      const size = psql(mainT, "SELECT pg_size_pretty(pg_database_size('preview'))", ['-At']).out;

      // Three rounds, copy and reference alternating, each figure the median: the copy is file creation
      // (system time) and the reference CPU, so a busy moment of the machine would tilt a single round.
      const copies: number[] = [];
      const refs: number[] = [];
      for (let round = 0; round < 3; round++) {
        copies.push(await provide(target(1), 'main'));
        const rows = psql(target(1), 'SELECT count(*) FROM blobs', ['-At']).out;
        if (rows !== String(mb * 1000)) throw new Error(`the copy has ${rows} rows`);
        await drop(target(1));

        // The reference: dump main and restore it into an empty service, as a pipe.
        await provide(target(2));
        const main = psql(mainT, 'SELECT 1', ['-At']);
        const copy = psql(target(2), 'SELECT 1', ['-At']);
        const refStart = performance.now();
        const dump = `${pgBin('15', 'pg_dump')} -Fc -h ${main.sock} -p ${main.port} -U preview preview`;
        const restore = `${pgBin('15', 'pg_restore')} --no-owner -h ${copy.sock} -p ${copy.port} -U preview -d preview`;
        const piped = spawnSync('/bin/bash', ['-c', `set -o pipefail; ${dump} | ${restore}`], {
          stdio: 'inherit',
        });
        refs.push(performance.now() - refStart);
        if (piped.status !== 0) throw new Error('pg_dump | pg_restore failed');
        const restored = psql(target(2), 'SELECT count(*) FROM blobs', ['-At']).out;
        if (restored !== String(mb * 1000)) throw new Error(`the restore has ${restored} rows`);
        await drop(target(2));
      }
      const copyMs = median(copies);
      const refMs = median(refs);
      // Context: the same copy when no spare is ready (the first one after a start, or two at once).
      await sparesSettled();
      rmSync(join(servicesRoot(rt), 'templates', 'postgres-15.spare'), { recursive: true, force: true });
      const cold = await timed(() => services.provide(target(3), 'main'));
      await drop(target(3));
      console.log(
        `from: main, ${mb} MB (database ${size}): copy ${copies.map((m) => m.toFixed(0)).join(', ')} ms (no spare ready: ${cold.toFixed(0)} ms); pg_dump | pg_restore ${refs.map((m) => m.toFixed(0)).join(', ')} ms`,
      );
      const ratio = refMs / copyMs;
      reportFigure({
        name: `services: from main ${mb} MB / pg_dump | pg_restore`,
        measured: Number(ratio.toFixed(2)),
        target: mb === 100 ? '≥ 3×' : 'context',
        ok: mb === 100 ? ratio >= 3 : true,
        unit: '×',
        detail: `medians of 3: copy ${copyMs.toFixed(0)} ms vs dump+restore ${refMs.toFixed(0)} ms (database ${size}); with no spare ready ${(refMs / cold).toFixed(2)}×`,
        ...(mb === 100 ? {} : { informational: true as const }),
      });
      await drop(mainT);
    }
  } finally {
    await services.close();
  }
}

await main();
