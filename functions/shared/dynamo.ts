import { Agent } from 'node:http';
import { connect } from 'node:net';
import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { TableName } from '../manifest/tables.js';
import { config } from './config.js';

let client: DynamoDBDocumentClient | undefined;

/**
 * The DynamoDB document client of this container, created once. Local mode points it at dynalite
 * (`DYNAMODB_ENDPOINT`) with placeholder credentials; every query is the same code in both modes.
 */
export function ddb(): DynamoDBDocumentClient {
  if (client) return client;
  const c = config();
  const base = new DynamoDBClient({
    region: c.region,
    ...(c.dynamodbEndpoint ? localDynamoClientConfig(c.dynamodbEndpoint) : {}),
  });
  dropNoOpLogger(base);
  client = DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
  return client;
}

/**
 * Remove the SDK's `loggerMiddleware` from a client created without a `logger` (so with the SDK's no-op
 * one). The middleware runs after every call whatever the logger, and first copies the input and the
 * output through the schema's sensitive-data filter (`schemaLogFilter`, a walk of every attribute of every
 * item returned) only to hand them to a logger that drops them: for the Query of a page of 21 runs that
 * walk was about a twentieth of the call's CPU. Errors still reach the caller as thrown.
 */
function dropNoOpLogger(base: DynamoDBClient): void {
  base.middlewareStack.remove('loggerMiddleware');
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
  return err instanceof ConditionalCheckFailedException;
}
