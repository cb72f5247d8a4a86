import { Agent } from 'node:http';
import { connect } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DynamoDBDocumentClient,
  GetCommand,
  paginateQuery,
  paginateScan,
  type QueryCommandInput,
  type ScanCommandInput,
  UpdateCommand,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { TableName } from '../../manifest/tables.js';
import { config } from '../config.js';
import { NotFoundError } from '../errors.js';
import { isAwsError } from './aws-errors.js';

let client: DynamoDBDocumentClient | undefined;

/**
 * The DynamoDB document client of this container, created once: `@aws-sdk/lib-dynamodb`'s
 * `DynamoDBDocumentClient` over a `DynamoDBClient` of the configured region, with the SDK's own retry mode
 * and endpoint handling (`AWS_ENDPOINT_URL_DYNAMODB`, which the cloud tier points at dynalite). Items go in
 * and come out as plain JavaScript values; attributes whose value is `undefined` are left out
 * (`removeUndefinedValues`), numbers come back as JavaScript numbers and sets as `Set`s (the SDK's
 * defaults). Local mode points it at dynalite (`DYNAMODB_ENDPOINT`) with placeholder credentials; every
 * query is the same code in both modes.
 *
 * The document client converts inputs and outputs, not errors: an error's `Item`
 * (`ReturnValuesOnConditionCheckFailure`) or `CancellationReasons[].Item` stays in DynamoDB's attribute
 * form (nothing reads them today; `unmarshall` from `@aws-sdk/util-dynamodb` where one would).
 */
export function ddb(): DynamoDBDocumentClient {
  if (client) return client;
  const c = config();
  client = DynamoDBDocumentClient.from(
    new DynamoDBClient({
      region: c.region,
      ...(c.dynamodbEndpoint ? localDynamoClientConfig(c.dynamodbEndpoint) : {}),
    }),
    { marshallOptions: { removeUndefinedValues: true } },
  );
  return client;
}

/**
 * Client settings for a local DynamoDB (dynalite): `http://host:port`, or `unix:<socket path>` (what the
 * local server uses, so sandboxed builds and apps, which share the host's loopback network but not its
 * files, cannot reach the database). Placeholder credentials: dynalite checks none.
 */
export function localDynamoClientConfig(endpoint: string) {
  const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
  if (!endpoint.startsWith('unix:')) return { endpoint, credentials };
  const socketPath = endpoint.slice('unix:'.length);
  const agent = new Agent({ keepAlive: true });
  // Every connection of this agent goes to the socket, whatever host the request names.
  (agent as unknown as { createConnection: () => ReturnType<typeof connect> }).createConnection = () =>
    connect(socketPath);
  return {
    endpoint: 'http://dynalite.local',
    credentials,
    requestHandler: new NodeHttpHandler({ httpAgent: agent }),
  };
}

/**
 * Every item a Query returns, page after page (lib-dynamodb's own paginator over `ddb()`): the one paging
 * loop of the use cases. A `Limit` in `input` is the page size; stop early by leaving the loop.
 */
export async function* queryItems<T = Record<string, unknown>>(input: QueryCommandInput): AsyncGenerator<T> {
  for await (const page of paginateQuery({ client: ddb() }, input))
    for (const item of page.Items ?? []) yield item as T;
}

/** Every item a Scan returns, page after page (lib-dynamodb's paginator, as `queryItems`). */
export async function* scanItems<T = Record<string, unknown>>(input: ScanCommandInput): AsyncGenerator<T> {
  for await (const page of paginateScan({ client: ddb() }, input))
    for (const item of page.Items ?? []) yield item as T;
}

/** How many items a Query matches (`Select: COUNT`, page after page), counting no further than `atMost`. */
export async function countItems(
  input: QueryCommandInput,
  atMost = Number.POSITIVE_INFINITY,
): Promise<number> {
  let count = 0;
  for await (const page of paginateQuery({ client: ddb() }, { ...input, Select: 'COUNT' })) {
    count += page.Count ?? 0;
    if (count >= atMost) break;
  }
  return count;
}

/** Physical name of a table. */
export function table(name: TableName): string {
  return config().tableNames[name];
}

/** True when a write failed its condition expression. */
export function isConditionFailure(err: unknown): boolean {
  return isAwsError(err, 'ConditionalCheckFailedException');
}

/** A conditional update: true when it was written, false when its condition failed (anything else throws). */
export async function updateIf(input: UpdateCommandInput): Promise<boolean> {
  try {
    await ddb().send(new UpdateCommand(input));
    return true;
  } catch (err) {
    if (isConditionFailure(err)) return false;
    throw err;
  }
}

/**
 * The item of `name` at `key` (a consistent read) when it belongs to `orgId`; otherwise a NotFoundError
 * saying `<what> not found`: another organization's item answers exactly as one that does not exist.
 */
export async function getOrgItem<T extends { orgId: string }>(
  name: TableName,
  key: Record<string, unknown>,
  orgId: string,
  what: string,
): Promise<T> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table(name), Key: key, ConsistentRead: true }),
  );
  const item = Item as T | undefined;
  if (!item || item.orgId !== orgId) throw new NotFoundError(`${what} not found`);
  return item;
}
