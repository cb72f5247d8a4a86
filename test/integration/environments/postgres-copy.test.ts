import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { copyFromServer, sparesSettled } from '../../../functions/ports/runtime/local/postgres-copy.js';
import { envId } from '../../../functions/ports/runtime/local/state.js';
import type { RuntimeTarget } from '../../../functions/ports/runtime/port.js';
import { localPostgres } from '../../support/local-services.js';

/*
 * `from: main`'s copy (postgres-copy.ts: Postgres's low-level backup API and a file-level copy) while main
 * keeps writing: the copy is one consistent moment of main (a transfer's two halves are both in it or
 * both out), main's server is left as it was (no replication slot, no backup in progress), a copy
 * that fails midway leaves main able to give the next one, and a copy made onto the spare cluster holds
 * main's files and nothing else.
 */

const { root, target, provide, where, close } = localPostgres('org-copy', 'acme/copy');
afterAll(close);

/** psql over the service's own socket, as its superuser. */
function sql(t: RuntimeTarget, query: string): string {
  const { sock, port } = where(t);
  const args = ['-X', '-At', '-v', 'ON_ERROR_STOP=1', '-h', sock, '-p', String(port), '-U', 'preview'];
  const out = spawnSync('psql', [...args, '-d', 'preview', '-c', query], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`psql: ${out.stderr}`);
  return out.stdout.trim();
}

describe("from: main's file-level copy", () => {
  const main = target(0);
  /** Whether main's temporary slot went with the copy's session (a backend ends a moment after psql). */
  const slotsGone = async () => {
    for (let i = 0; i < 100; i++) {
      if (sql(main, 'SELECT count(*) FROM pg_replication_slots') === '0') return true;
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  };

  test('main writing throughout: the copy is one consistent moment, and main is left as it was', async () => {
    await provide(main);
    sql(
      main,
      'CREATE TABLE accounts (id int PRIMARY KEY, balance int); INSERT INTO accounts VALUES (1, 1000000), (2, 0); CREATE TABLE log (n serial, at timestamptz DEFAULT now()); INSERT INTO log SELECT FROM generate_series(1, 50000);',
    );
    // A writer moving money between the two accounts in transactions, and logging each, until stopped.
    const { sock, port } = where(main);
    const writer = spawn(
      'psql',
      ['-X', '-q', '-h', sock, '-p', String(port), '-U', 'preview', '-d', 'preview'],
      { stdio: ['pipe', 'ignore', 'ignore'] },
    );
    const transfer =
      'BEGIN; UPDATE accounts SET balance = balance - 7 WHERE id = 1; INSERT INTO log DEFAULT VALUES; UPDATE accounts SET balance = balance + 7 WHERE id = 2; COMMIT;\n';
    let writing = true;
    const pump = () => {
      while (writing && writer.stdin.write(transfer.repeat(20)));
      if (writing) writer.stdin.once('drain', pump);
    };
    pump();
    await new Promise((r) => setTimeout(r, 300));
    const before = Number(sql(main, 'SELECT count(*) FROM log'));
    try {
      await provide(target(1), 'main');
    } finally {
      writing = false;
      writer.stdin.end();
      await new Promise((r) => writer.once('exit', r));
    }
    const copy = target(1);
    // Every transfer whole: the total is what it was, and the log counts one row per transfer.
    expect(sql(copy, 'SELECT sum(balance) FROM accounts')).toBe('1000000');
    const moved = Number(sql(copy, 'SELECT balance FROM accounts WHERE id = 2')) / 7;
    expect(moved).toBeGreaterThan(0);
    expect(Number(sql(copy, 'SELECT count(*) FROM log'))).toBe(50_000 + moved);
    expect(Number(sql(copy, 'SELECT count(*) FROM log'))).toBeGreaterThanOrEqual(before);
    // Main moved on after the copy and still adds up; it keeps no slot and no backup.
    expect(Number(sql(main, 'SELECT count(*) FROM log'))).toBeGreaterThanOrEqual(
      Number(sql(copy, 'SELECT count(*) FROM log')),
    );
    expect(sql(main, 'SELECT sum(balance) FROM accounts')).toBe('1000000');
    expect(await slotsGone()).toBe(true);
    // The copy writes on its own.
    sql(copy, 'UPDATE accounts SET balance = 0');
    expect(sql(main, 'SELECT sum(balance) FROM accounts')).toBe('1000000');
  }, 60_000);

  test('a copy that fails midway leaves main able to give the next one', async () => {
    const { sock, port } = where(main);
    const broken = join(root, 'broken');
    mkdirSync(broken);
    // Main's data directory named wrong: the backup starts, the file copy fails, the session ends.
    await expect(copyFromServer('15', sock, port, join(root, 'no-such-cluster'), broken)).rejects.toThrow(
      /no-such-cluster/,
    );
    expect(await slotsGone()).toBe(true);
    expect(readdirSync(root)).not.toContain('no-such-cluster');
    await provide(target(2), 'main');
    expect(sql(target(2), 'SELECT sum(balance) FROM accounts')).toBe('1000000');
  }, 60_000);

  test("a copy onto the spare keeps main's files and nothing else; two copies at once both hold", async () => {
    // The spare is the template's copy: plant a file main lacks, as a template-only file would be.
    await sparesSettled();
    const spare = join(root, 'services', 'templates', 'postgres-15.spare');
    expect(existsSync(join(spare, 'PG_VERSION'))).toBe(true);
    writeFileSync(join(spare, 'base', 'stale-file'), 'not main');
    await Promise.all([provide(target(3), 'main'), provide(target(4), 'main')]);
    for (const t of [target(3), target(4)]) {
      expect(sql(t, 'SELECT sum(balance) FROM accounts')).toBe('1000000');
      const cluster = join(root, 'services', ...envId(t).split('/'), 'db', 'cluster');
      expect(existsSync(join(cluster, 'base', 'stale-file'))).toBe(false);
      expect(readFileSync(join(cluster, 'PG_VERSION'), 'utf8').trim()).toBe('15');
    }
    // Main's database directory and the copies' hold the same relations.
    const oid = sql(main, "SELECT oid FROM pg_database WHERE datname = 'preview'");
    const relations = (t: RuntimeTarget) =>
      readdirSync(join(root, 'services', ...envId(t).split('/'), 'db', 'cluster', 'base', oid))
        .filter((f) => /^\d+(_\w+)?$/.test(f))
        .sort();
    expect(relations(target(3))).toEqual(relations(main));
  }, 60_000);
});
