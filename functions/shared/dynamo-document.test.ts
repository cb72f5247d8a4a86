import { describe, expect, test } from '@jest/globals';
import type { AwsJsonClient } from './aws-json.js';
import { AwsServiceError } from './aws-json.js';
import {
  BatchGetCommand,
  BatchWriteCommand,
  DocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from './dynamo-document.js';

/** A JSON client that records what it is asked and answers (or throws) what it is told. */
function wire(answer: (operation: string, input: any) => unknown) {
  const calls: { operation: string; input: any }[] = [];
  const client = {
    call: async (operation: string, input: object) => {
      calls.push({ operation, input });
      return answer(operation, input);
    },
  } as unknown as AwsJsonClient;
  return { calls, db: new DocumentClient(client) };
}

describe('DocumentClient', () => {
  test('marshals keys, items and expression values; drops undefined attributes', async () => {
    const { calls, db } = wire(() => ({}));
    await db.send(
      new PutCommand({
        TableName: 't',
        Item: { id: 'a', n: 3, tags: ['x'], nested: { ok: true, gone: undefined }, missing: undefined },
        ConditionExpression: 'attribute_not_exists(id)',
      }),
    );
    await db.send(
      new UpdateCommand({
        TableName: 't',
        Key: { id: 'a' },
        UpdateExpression: 'SET #n = :n',
        ExpressionAttributeNames: { '#n': 'n' },
        ExpressionAttributeValues: { ':n': 4, ':none': null },
      }),
    );
    expect(calls).toEqual([
      {
        operation: 'PutItem',
        input: {
          TableName: 't',
          Item: {
            id: { S: 'a' },
            n: { N: '3' },
            tags: { L: [{ S: 'x' }] },
            nested: { M: { ok: { BOOL: true } } },
          },
          ConditionExpression: 'attribute_not_exists(id)',
        },
      },
      {
        operation: 'UpdateItem',
        input: {
          TableName: 't',
          Key: { id: { S: 'a' } },
          UpdateExpression: 'SET #n = :n',
          ExpressionAttributeNames: { '#n': 'n' },
          ExpressionAttributeValues: { ':n': { N: '4' }, ':none': { NULL: true } },
        },
      },
    ]);
  });

  test('unmarshals the item, the items and the page key of an answer', async () => {
    const { calls, db } = wire((op) =>
      op === 'GetItem'
        ? { Item: { id: { S: 'a' }, n: { N: '1.5' } } }
        : {
            Items: [{ id: { S: 'b' } }, { id: { S: 'c' }, on: { BOOL: false } }],
            Count: 2,
            LastEvaluatedKey: { id: { S: 'c' }, at: { N: '7' } },
          },
    );
    expect((await db.send(new GetCommand({ TableName: 't', Key: { id: 'a' } }))).Item).toEqual({
      id: 'a',
      n: 1.5,
    });
    const page = await db.send(
      new QueryCommand({
        TableName: 't',
        KeyConditionExpression: 'id = :id',
        ExpressionAttributeValues: { ':id': 'b' },
        ExclusiveStartKey: { id: 'a', at: 3 },
      }),
    );
    expect(page).toEqual({
      Items: [{ id: 'b' }, { id: 'c', on: false }],
      Count: 2,
      LastEvaluatedKey: { id: 'c', at: 7 },
    });
    expect(calls[1]!.input.ExclusiveStartKey).toEqual({ id: { S: 'a' }, at: { N: '3' } });
  });

  test('batch reads and writes: requests, responses and unprocessed requests', async () => {
    const { calls, db } = wire((op) =>
      op === 'BatchGetItem'
        ? {
            Responses: { t: [{ id: { S: 'a' } }] },
            UnprocessedKeys: { t: { Keys: [{ id: { S: 'b' } }], ProjectionExpression: 'id' } },
          }
        : { UnprocessedItems: { t: [{ PutRequest: { Item: { id: { S: 'c' } } } }] } },
    );
    const got = await db.send(
      new BatchGetCommand({
        RequestItems: { t: { Keys: [{ id: 'a' }, { id: 'b' }], ProjectionExpression: 'id' } },
      }),
    );
    expect(calls[0]!.input.RequestItems).toEqual({
      t: { Keys: [{ id: { S: 'a' } }, { id: { S: 'b' } }], ProjectionExpression: 'id' },
    });
    expect(got.Responses).toEqual({ t: [{ id: 'a' }] });
    expect(got.UnprocessedKeys).toEqual({ t: { Keys: [{ id: 'b' }], ProjectionExpression: 'id' } });

    const put = await db.send(
      new BatchWriteCommand({
        RequestItems: { t: [{ PutRequest: { Item: { id: 'c' } } }, { DeleteRequest: { Key: { id: 'd' } } }] },
      }),
    );
    expect(calls[1]!.input.RequestItems).toEqual({
      t: [{ PutRequest: { Item: { id: { S: 'c' } } } }, { DeleteRequest: { Key: { id: { S: 'd' } } } }],
    });
    expect(put.UnprocessedItems).toEqual({ t: [{ PutRequest: { Item: { id: 'c' } } }] });
  });

  test("a failed condition's returned item is unmarshalled; the error is the service's", async () => {
    const { db } = wire(() => {
      throw new AwsServiceError(
        'ConditionalCheckFailedException',
        'The conditional request failed',
        400,
        'R',
        {
          Item: { id: { S: 'a' }, v: { N: '2' } },
        },
      );
    });
    const err = (await db
      .send(
        new PutCommand({ TableName: 't', Item: { id: 'a' }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }),
      )
      .catch((e: unknown) => e)) as AwsServiceError;
    expect(err.name).toBe('ConditionalCheckFailedException');
    expect(err.Item).toEqual({ id: 'a', v: 2 });
  });
});
