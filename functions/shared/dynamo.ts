import { Agent } from 'node:http';
import { connect } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { TableName } from '../manifest/tables.js';
import { isAwsError } from './aws-errors.js';
import { config } from './config.js';

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

/** Physical name of a table. */
export function table(name: TableName): string {
  return config().tableNames[name];
}

/** True when a write failed its condition expression. */
export function isConditionFailure(err: unknown): boolean {
  return isAwsError(err, 'ConditionalCheckFailedException');
}
