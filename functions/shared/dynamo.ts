import { Agent } from 'node:http';
import { connect } from 'node:net';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { TableName } from '../manifest/tables.js';
import { AwsJsonClient, DYNAMODB, isAwsError } from './aws-json.js';
import { config } from './config.js';
import { DocumentClient } from './dynamo-document.js';

let client: DocumentClient | undefined;

/**
 * The DynamoDB document client of this container, created once: the document layer of
 * shared/dynamo-document.ts over the JSON-protocol client of shared/aws-json.ts. Local mode points it at
 * dynalite (`DYNAMODB_ENDPOINT`) with placeholder credentials; every query is the same code in both modes.
 */
export function ddb(): DocumentClient {
  if (client) return client;
  const c = config();
  const local = c.dynamodbEndpoint ? localDynamoClientConfig(c.dynamodbEndpoint) : undefined;
  client = new DocumentClient(
    new AwsJsonClient(DYNAMODB, {
      region: c.region,
      ...(local
        ? {
            endpoint: local.endpoint,
            credentials: async () => local.credentials,
            ...(local.requestHandler ? { handler: local.requestHandler } : {}),
          }
        : {}),
    }),
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
