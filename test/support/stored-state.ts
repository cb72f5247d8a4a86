import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBClient, paginateScan } from '@aws-sdk/client-dynamodb';
import { type TableName, tableNames } from '../../functions/manifest/tables.js';
import { localDynamoClientConfig } from '../../functions/shared/aws/dynamo.js';
import { config } from '../../functions/shared/config.js';

/*
 * Everything the local server stored, read from outside: every table's items as stored and the secret
 * files, so a test can show that a refused request changed nothing (equal snapshots, equal state). Used by
 * the fuzz tier and the integration tests.
 */

let client: DynamoDBClient | undefined;
/** A client of the local server's dynalite (its endpoint and table names come from the server's env). */
function dynamo(): DynamoDBClient {
  client ??= new DynamoDBClient({ region: 'local', ...localDynamoClientConfig(config().dynamodbEndpoint!) });
  return client;
}

/** Every item of a table, as stored (raw attribute values), in a stable order. */
export async function scanTable(name: TableName): Promise<string[]> {
  const items: string[] = [];
  for await (const page of paginateScan({ client: dynamo() }, { TableName: config().tableNames[name] }))
    for (const item of page.Items ?? []) items.push(stableJson(item));
  return items.sort();
}

/** Files of the secret store (name and content digest). */
export function secretFiles(dataDir: string): string[] {
  const dir = join(dataDir, 'secrets');
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.sort().map(
    (n) =>
      `${n} ${createHash('sha256')
        .update(readFileSync(join(dir, n)))
        .digest('hex')}`,
  );
}

/**
 * Bookkeeping every request writes, whatever its answer: the fair share's request counters
 * (core/fair-share.ts). A refused request counts against its organization's budget like any other.
 */
const BOOKKEEPING: readonly TableName[] = ['quotas'];

/**
 * Everything stored: every table of the manifest but the bookkeeping, and the secret files. Equal
 * snapshots, equal state.
 */
export async function snapshot(dataDir: string): Promise<Record<string, string[]>> {
  const stored = tableNames.filter((t) => !BOOKKEEPING.includes(t));
  const scans = await Promise.all(stored.map(async (t) => [t, await scanTable(t)] as const));
  return { ...Object.fromEntries(scans), secretFiles: secretFiles(dataDir) };
}

/** JSON with object keys sorted at every level. */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** Stop the dynalite client of `snapshot` (call in afterAll). */
export function closeSnapshots(): void {
  client?.destroy();
  client = undefined;
}
