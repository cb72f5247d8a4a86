import { mkdirSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import {
  type AttributeDefinition,
  CreateTableCommand,
  DynamoDBClient,
  ListTablesCommand,
} from '@aws-sdk/client-dynamodb';
import { AbstractKeyIterator, AbstractValueIterator } from 'abstract-level';
import dynalite from 'dynalite';
import { type TableDef, tables } from '../../functions/manifest/tables.js';
import { localDynamoClientConfig } from '../../functions/shared/dynamo.js';

export interface EmbeddedDynamo {
  endpoint: string;
  stop(): Promise<void>;
}

/** Physical table names in local mode. */
export const localTableName = (name: string): string => `preview-${name}`;

/*
 * dynalite 4.0.0 ends the LevelDB iterator behind every query and scan stream with `iterator.return()`,
 * which abstract-level 3 iterators do not have (they have `close()`), so none was ever closed and the local
 * server's memory grew without bound under load (about +170 MB of RSS per 10 s of `GET /run`). Give them
 * the method dynalite calls. Chosen over a patch-package patch (an install step, and a patch to re-cut on
 * every dynalite release) and over another engine (dynalite is what Architect's sandbox uses); remove it
 * when dynalite closes its iterators itself.
 */
for (const Iterator of [AbstractKeyIterator, AbstractValueIterator]) {
  const proto = Iterator.prototype as unknown as { return?: () => Promise<void>; close(): Promise<void> };
  proto.return ??= function (this: { close(): Promise<void> }) {
    return this.close();
  };
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
            Projection: { ProjectionType: 'ALL' as const },
          })),
        }
      : {}),
  };
}

/** Create every table of `functions/manifest/tables.ts` that does not exist yet (idempotent). */
export async function ensureTables(endpoint: string): Promise<Record<string, string>> {
  const client = new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(endpoint) });
  const existing = new Set((await client.send(new ListTablesCommand({}))).TableNames ?? []);
  const env: Record<string, string> = {};
  for (const [name, def] of Object.entries(tables) as [string, TableDef][]) {
    const physical = localTableName(name);
    env[def.envVar] = physical;
    if (!existing.has(physical)) await client.send(new CreateTableCommand(createTableInput(physical, def)));
  }
  client.destroy();
  return env;
}
