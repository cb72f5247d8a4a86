import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
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
    ...(c.dynamodbEndpoint
      ? { endpoint: c.dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
  });
  client = DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
  return client;
}

/** Physical name of a table. */
export function table(name: TableName): string {
  return config().tableNames[name];
}

/** True when a write failed its condition expression. */
export function isConditionFailure(err: unknown): boolean {
  return err instanceof ConditionalCheckFailedException;
}
