import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { crc32 as zlibCrc32 } from 'node:zlib';
import {
  type AttributeDefinition,
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  type Projection as DynamoProjection,
  ListTablesCommand,
  paginateScan,
} from '@aws-sdk/client-dynamodb';
import { AbstractKeyIterator, AbstractValueIterator } from 'abstract-level';
import dynalite from 'dynalite';
import {
  keys,
  type Projection,
  type TableDef,
  type TableName,
  tables,
} from '../../functions/manifest/tables.js';
import { localDynamoClientConfig } from '../../functions/shared/aws/dynamo.js';
import { log } from '../../functions/shared/log.js';

export interface EmbeddedDynamo {
  endpoint: string;
  stop(): Promise<void>;
}

/*
 * dynalite is pinned to an exact version in package.json (4.0.0, no caret): the three patches below reach
 * into its internals, which a patch release may change without a word, and they would then stop applying
 * silently. Bump the pin on purpose and re-run test/integration/local-server/dynalite-*.test.ts
 * (docs/contributing.md, "Pinned dependencies"); lib/local/dynalite.test.ts holds the pin.
 */

/** Physical table names in local mode. */
export const localTableName = (name: string): string => `preview-${name}`;

/*
 * dynalite 4.0.0 ends the LevelDB iterator behind every query and scan stream with `iterator.return()`,
 * which abstract-level 3 iterators do not have (they have `close()`), so none was ever closed and the local
 * server's memory grew without bound under load (about +170 MB of RSS per 10 s of `GET /run`). Give them
 * the method dynalite calls. No fixed dynalite exists (4.0.0 is the latest release). Chosen over a
 * patch-package patch, which needs a postinstall script (skipped by `npm ci --ignore-scripts`, and a
 * silent leak then) and a patch re-cut on every dynalite release, and over
 * another engine (dynalite is what Architect's sandbox uses, and the rest of it holds up). It is applied
 * wherever dynalite is started from this module, tests included.
 * test/integration/local-server/dynalite-iterators.test.ts proves no iterator stays open, and fails once
 * dynalite closes its iterators itself: then remove this.
 */
for (const Iterator of [AbstractKeyIterator, AbstractValueIterator]) {
  const proto = Iterator.prototype as unknown as { return?: () => Promise<void>; close(): Promise<void> };
  proto.return ??= function (this: { close(): Promise<void> }) {
    return this.close();
  };
}

/*
 * dynalite signs every answer with an `x-amz-crc32` header computed by `buffer-crc32`, a byte-at-a-time
 * loop in JavaScript: about 80 µs for the 10 KB answer to the Query of a page of runs, more than the rest of
 * the answer's writing. Node computes the same CRC-32 natively (`zlib.crc32`, Node 20.15+): the header is
 * the same number (test/integration/local-server/dynalite-query.test.ts compares them). Only the
 * one-argument form dynalite calls (`unsigned(body)`, a string or a Buffer) is replaced; anything else goes
 * to the original.
 */
const bufferCrc32 = createRequire(createRequire(import.meta.url).resolve('dynalite'))('buffer-crc32') as {
  unsigned: ((...args: unknown[]) => number) & { native?: true };
};
if (typeof zlibCrc32 === 'function' && !bufferCrc32.unsigned.native) {
  const original = bufferCrc32.unsigned;
  const unsigned = (...args: unknown[]): number =>
    args.length === 1 && (typeof args[0] === 'string' || Buffer.isBuffer(args[0]))
      ? zlibCrc32(args[0])
      : original(...args);
  unsigned.native = true as const;
  bufferCrc32.unsigned = unsigned;
}

/*
 * dynalite answers a Query by piping a LevelDB iterator through a Readable stream (one promise per item)
 * and a chain of `lazy` streams (several events per item): for a page of 21 runs that costs this process
 * more than the whole GetItem it answers beside it, a cost DynamoDB does not have. For a plain Query (no
 * FilterExpression or QueryFilter, no index that fetches from the table, no consumed capacity asked for)
 * read the same range of the same iterator in batches instead, and build the answer exactly as
 * `db.queryTable` does (same items, Count, ScannedCount, LastEvaluatedKey, 1 MB and Limit cut-offs,
 * projection). Scans and every other Query take dynalite's own path. Only the engine changes: the request
 * the handlers send is the one they send to DynamoDB. test/integration/local-server/dynalite-query.test.ts
 * compares the two paths on the same data.
 */
/** The request fields `queryTable` reads (dynalite's validated request). */
interface QueryData {
  TableName: string;
  IndexName?: string;
  KeyConditions?: unknown;
  Limit?: number;
  Select?: string;
  ReturnConsumedCapacity?: string;
  QueryFilter?: unknown;
  ScanFilter?: unknown;
  _filter?: unknown;
  _projection?: { paths: unknown };
  AttributesToGet?: unknown;
}
interface DynaliteStore {
  db: {
    values(options: Record<string, unknown>): {
      nextv(n: number): Promise<unknown[]>;
      close(): Promise<void>;
    };
  };
}
type QueryTable = (
  store: DynaliteStore,
  table: { KeySchema: { AttributeName: string }[] },
  data: QueryData,
  opts: Record<string, unknown>,
  isLocal: boolean,
  fetchFromItemDb: boolean,
  startKeyNames: string[],
  cb: (err: unknown, result?: unknown) => void,
) => void;
const dynaliteDb = createRequire(import.meta.url)('dynalite/db') as {
  queryTable: QueryTable & { batched?: true; enabled?: boolean };
  itemSize(item: unknown, compress?: boolean, addMetaSize?: boolean, rangeKey?: string): number;
  mapPaths(paths: unknown, item: unknown): unknown;
};
/** dynalite's own `queryTable`, for the queries the batched path leaves to it. */
const dynaliteQueryTable: QueryTable = dynaliteDb.queryTable.batched
  ? (dynaliteDb as unknown as { original: QueryTable }).original
  : dynaliteDb.queryTable;
if (!dynaliteDb.queryTable.batched) {
  (dynaliteDb as unknown as { original: QueryTable }).original = dynaliteQueryTable;
  const batched: QueryTable & { batched?: true; enabled?: boolean } = (
    store,
    table,
    data,
    opts,
    isLocal,
    fromItems,
    names,
    cb,
  ) => {
    const plain =
      data.KeyConditions !== undefined &&
      !fromItems &&
      !data._filter &&
      !data.QueryFilter &&
      !data.ScanFilter &&
      data.ReturnConsumedCapacity !== 'TOTAL' &&
      data.ReturnConsumedCapacity !== 'INDEXES';
    if (!plain || batched.enabled === false)
      return dynaliteQueryTable(store, table, data, opts, isLocal, fromItems, names, cb);
    batchedQuery(store, table, data, opts, isLocal, names).then(
      (result) => cb(null, result),
      (err) => cb(err),
    );
  };
  batched.batched = true;
  dynaliteDb.queryTable = batched;
}
/** Whether plain Queries take the batched path (default), or dynalite's own: for the comparison test. */
export function useBatchedQueries(on: boolean): void {
  dynaliteDb.queryTable.enabled = on;
}

/** `db.queryTable` of dynalite 4.0.0 for a plain Query, reading the iterator in batches. */
async function batchedQuery(
  store: DynaliteStore,
  table: { KeySchema: { AttributeName: string }[] },
  data: QueryData,
  opts: Record<string, unknown>,
  isLocal: boolean,
  names: string[],
): Promise<Record<string, unknown>> {
  const MAX_BYTES = 1024 * 1024;
  // The key range of the sub-database dynalite keeps the items or the index in (its prefixed wrapper).
  const prefix = data.IndexName
    ? `index-${isLocal ? 'local' : 'global'}~${data.TableName}~${data.IndexName}~`
    : `item-${data.TableName}~`;
  const range: Record<string, unknown> = { ...opts };
  if (range.gte) range.gte = prefix + range.gte;
  else if (range.gt) range.gt = prefix + range.gt;
  else range.gte = prefix;
  if (range.lte) range.lte = prefix + range.lte;
  else if (range.lt) range.lt = prefix + range.lt;
  else range.lt = `${prefix}\xFF`;
  const rangeKey = table.KeySchema[1]?.AttributeName;
  const limit = data.Limit;
  let items: Record<string, unknown>[] = [];
  let count = 0;
  let size = 0;
  const full = () => (limit !== undefined && count >= limit) || size >= MAX_BYTES;
  const iterator = store.db.values(range);
  try {
    while (!full()) {
      // No more than the Limit still wanted: an entry past it would be read and decoded for nothing.
      const batch = (await iterator.nextv(limit !== undefined ? limit - count : 256)) as Record<
        string,
        unknown
      >[];
      if (!batch.length) break;
      for (const item of batch) {
        if (full()) break;
        count++;
        size += dynaliteDb.itemSize(item, true, true, rangeKey);
        items.push(item);
      }
    }
  } finally {
    await iterator.close();
  }
  const result: Record<string, unknown> = { ScannedCount: count };
  const last = items[items.length - 1];
  if (full()) {
    if (limit) items.splice(limit);
    if (last) result.LastEvaluatedKey = Object.fromEntries(names.map((name) => [name, last[name]]));
  }
  const paths = data._projection ? data._projection.paths : data.AttributesToGet;
  if (paths) items = items.map((item) => dynaliteDb.mapPaths(paths, item) as Record<string, unknown>);
  result.Count = items.length;
  if (data.Select !== 'COUNT') result.Items = items;
  return result;
}

/**
 * Start dynalite in-process, persisted under `path` (LevelDB). Table operations complete at once
 * (`createTableMs: 0`), as in Architect's sandbox. It listens on a loopback port, or with `socket` on that
 * Unix socket (endpoint `unix:<socket>`): the local server puts it in its private data dir, where builds
 * and apps (sandboxed, but on the host's loopback network) cannot reach it.
 */
export async function startDynalite(
  path: string,
  opts: { port?: number; socket?: string } = {},
): Promise<EmbeddedDynamo> {
  mkdirSync(path, { recursive: true });
  const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (opts.socket) rmSync(opts.socket, { force: true }); // a stale socket of a crashed run
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (opts.socket) server.listen(opts.socket, () => resolve());
    else server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const endpoint = opts.socket
    ? `unix:${opts.socket}`
    : `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    endpoint,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function createTableInput(name: string, def: TableDef) {
  const attrs = new Map<string, AttributeDefinition>();
  const add = (k: { name: string; type: 'S' | 'N' }) =>
    attrs.set(k.name, { AttributeName: k.name, AttributeType: k.type });
  add(def.partitionKey);
  if (def.sortKey) add(def.sortKey);
  for (const ix of def.indexes) {
    add(ix.partitionKey);
    if (ix.sortKey) add(ix.sortKey);
  }
  const keySchema = (pk: { name: string }, sk?: { name: string }) => [
    { AttributeName: pk.name, KeyType: 'HASH' as const },
    ...(sk ? [{ AttributeName: sk.name, KeyType: 'RANGE' as const }] : []),
  ];
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST' as const,
    AttributeDefinitions: [...attrs.values()],
    KeySchema: keySchema(def.partitionKey, def.sortKey),
    ...(def.indexes.length
      ? {
          GlobalSecondaryIndexes: def.indexes.map((ix) => ({
            IndexName: ix.name,
            KeySchema: keySchema(ix.partitionKey, ix.sortKey),
            Projection: projectionOf(ix.projection),
          })),
        }
      : {}),
  };
}

function projectionOf(projection: Projection = 'ALL'): DynamoProjection {
  if (projection === 'ALL' || projection === 'KEYS_ONLY') return { ProjectionType: projection };
  return { ProjectionType: 'INCLUDE', NonKeyAttributes: [...projection.include] };
}

/** The indexes of a table as a comparable string: names, keys and projections, sorted by name. */
function indexSignature(
  indexes: { IndexName?: string; KeySchema?: { AttributeName?: string }[]; Projection?: DynamoProjection }[],
): string {
  return JSON.stringify(
    indexes
      .map((ix) => [
        ix.IndexName,
        (ix.KeySchema ?? []).map((k) => k.AttributeName),
        ix.Projection?.ProjectionType,
        [...(ix.Projection?.NonKeyAttributes ?? [])].sort(),
      ])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
  );
}

/**
 * What an item of an older table lacks, added while it is copied into the new one (runs written
 * before the (test, status) and (folder, status) indexes lack their keys).
 */
const backfills: Partial<Record<TableName, (item: Record<string, AttributeValue>) => void>> = {
  runs(item) {
    const s = (name: string) => item[name]?.S;
    const folderId = item.folder?.M?.id?.S;
    const [orgId, runId, testId, status, createdAt] = ['orgId', 'runId', 'testId', 'status', 'createdAt'].map(
      s,
    );
    if (!orgId || !runId || !testId || !status || !createdAt || folderId === undefined) return;
    const wanted = keys.runs.indexKeys({ orgId, runId, testId, folderId, status, createdAt });
    for (const [name, value] of Object.entries(wanted)) item[name] ??= { S: value };
    // A flaky run stored before the sparse `listFlaky` index joins it.
    if (item.flaky?.BOOL === true) item.flakyKey ??= { S: keys.runs.flaky(orgId) };
  },
};

/** Copy every item of `from` into `to` (BatchWrite, retrying what is unprocessed), transformed by `fix`. */
async function copyItems(
  client: DynamoDBClient,
  from: string,
  to: string,
  fix?: (item: Record<string, AttributeValue>) => void,
): Promise<number> {
  let copied = 0;
  for await (const page of paginateScan({ client }, { TableName: from })) {
    const items = page.Items ?? [];
    for (let i = 0; i < items.length; i += 25) {
      let requests = items.slice(i, i + 25).map((Item) => {
        fix?.(Item);
        return { PutRequest: { Item } };
      });
      while (requests.length) {
        const res = await client.send(new BatchWriteItemCommand({ RequestItems: { [to]: requests } }));
        requests = (res.UnprocessedItems?.[to] ?? []) as typeof requests;
      }
    }
    copied += items.length;
  }
  return copied;
}

/** Wait until a table is ACTIVE (`true`) or gone (`false`): dynalite changes them a tick after the call. */
async function waitTable(client: DynamoDBClient, name: string, active: boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const status = await client
      .send(new DescribeTableCommand({ TableName: name }))
      .then((r) => r.Table?.TableStatus)
      .catch((err: Error) => {
        if (err.name === 'ResourceNotFoundException') return undefined;
        throw err;
      });
    if (active ? status === 'ACTIVE' : status === undefined) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`local table ${name} did not become ${active ? 'active' : 'deleted'}`);
}

/**
 * Bring an existing table to its manifest definition when its indexes differ (dynalite cannot add an index
 * to a table): copy its items into `<name>-migrating`, recreate the table, copy them back (adding what
 * `backfills` says), drop the copy. Each step is safe to repeat, so a crash part-way resumes at the next
 * start: the old table is dropped only once the copy holds all of it.
 */
async function migrateTable(
  client: DynamoDBClient,
  name: TableName,
  physical: string,
  existing: Set<string>,
): Promise<void> {
  const def: TableDef = tables[name];
  const wanted = createTableInput(physical, def);
  const temp = `${physical}-migrating`;
  const target = indexSignature(wanted.GlobalSecondaryIndexes ?? []);
  const current = existing.has(physical)
    ? indexSignature(
        (await client.send(new DescribeTableCommand({ TableName: physical }))).Table
          ?.GlobalSecondaryIndexes ?? [],
      )
    : undefined;
  if (current === target && !existing.has(temp)) return;
  if (current !== undefined && current !== target) {
    // The old table is still whole: (re)copy it, then drop it.
    if (!existing.has(temp)) {
      await client.send(new CreateTableCommand(createTableInput(temp, def)));
      await waitTable(client, temp, true);
    }
    await copyItems(client, physical, temp);
    await client.send(new DeleteTableCommand({ TableName: physical }));
    await waitTable(client, physical, false);
  }
  if (current !== target) {
    await client.send(new CreateTableCommand(wanted));
    await waitTable(client, physical, true);
  }
  const copied = await copyItems(client, temp, physical, backfills[name]);
  await client.send(new DeleteTableCommand({ TableName: temp }));
  await waitTable(client, temp, false);
  log.info('local table rebuilt with its new indexes', { table: physical, items: copied });
}

/**
 * Create every table of `functions/manifest/tables.ts` that does not exist yet, and rebuild one whose
 * indexes are not the manifest's any more (idempotent).
 */
/**
 * The `TABLE_*` variables of the local tables, touching nothing: what a client of a running server's
 * dynalite uses (previewctl's admin commands). The server keeps the tables' schema; a client that
 * migrated them (ensureTables) would rebuild tables under it.
 */
export function localTableEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, def] of Object.entries(tables) as [TableName, TableDef][])
    env[def.envVar] = localTableName(name);
  return env;
}

export async function ensureTables(endpoint: string): Promise<Record<string, string>> {
  const client = new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(endpoint) });
  const existing = new Set((await client.send(new ListTablesCommand({}))).TableNames ?? []);
  const env: Record<string, string> = {};
  // Tables are independent of each other: all at once (a first start creates them all).
  await Promise.all(
    (Object.entries(tables) as [TableName, TableDef][]).map(async ([name, def]) => {
      const physical = localTableName(name);
      env[def.envVar] = physical;
      if (existing.has(physical) || existing.has(`${physical}-migrating`))
        await migrateTable(client, name, physical, existing);
      else {
        await client.send(new CreateTableCommand(createTableInput(physical, def)));
        // dynalite answers CreateTable with the table CREATING and marks it ACTIVE in a write of its own
        // right after (`createTableMs: 0`); an item written before that write lands is refused as
        // ResourceNotFoundException, which a loaded machine made happen. Wait for ACTIVE, as with DynamoDB.
        await waitTable(client, physical, true);
      }
    }),
  );
  client.destroy();
  return env;
}
