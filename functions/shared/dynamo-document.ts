import type {
  BatchGetCommandInput,
  BatchGetCommandOutput,
  BatchWriteCommandInput,
  BatchWriteCommandOutput,
  DeleteCommandInput,
  DeleteCommandOutput,
  GetCommandInput,
  GetCommandOutput,
  PutCommandInput,
  PutCommandOutput,
  QueryCommandInput,
  QueryCommandOutput,
  ScanCommandInput,
  ScanCommandOutput,
  UpdateCommandInput,
  UpdateCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import type { AwsJsonClient } from './aws-json.js';

/*
 * The DynamoDB document layer over the JSON-protocol client (shared/aws-json.ts): the commands of
 * `@aws-sdk/lib-dynamodb` under the same names, inputs and outputs (their types are that package's), so a
 * query reads the same as with the SDK's document client. Items go in as plain JavaScript values and come
 * out as such: `Key`, `Item`, `ExpressionAttributeValues`, `ExclusiveStartKey`, batch requests are
 * marshalled, and `Item`, `Items`, `Attributes`, `LastEvaluatedKey`, batch responses and unprocessed
 * requests unmarshalled, by `@aws-sdk/util-dynamodb` (what the document client uses) with
 * `removeUndefinedValues`. An error's `Item` (ReturnValuesOnConditionCheckFailure) is unmarshalled too.
 */

/** A document command: the DynamoDB operation and its (unmarshalled) input. */
export abstract class DocumentCommand<I, O> {
  abstract readonly operation: string;
  /** Only carries the output type. */
  declare readonly __output?: O;
  constructor(readonly input: I) {}
}

export class GetCommand extends DocumentCommand<GetCommandInput, GetCommandOutput> {
  readonly operation = 'GetItem';
}
export class PutCommand extends DocumentCommand<PutCommandInput, PutCommandOutput> {
  readonly operation = 'PutItem';
}
export class UpdateCommand extends DocumentCommand<UpdateCommandInput, UpdateCommandOutput> {
  readonly operation = 'UpdateItem';
}
export class DeleteCommand extends DocumentCommand<DeleteCommandInput, DeleteCommandOutput> {
  readonly operation = 'DeleteItem';
}
export class QueryCommand extends DocumentCommand<QueryCommandInput, QueryCommandOutput> {
  readonly operation = 'Query';
}
export class ScanCommand extends DocumentCommand<ScanCommandInput, ScanCommandOutput> {
  readonly operation = 'Scan';
}
export class BatchGetCommand extends DocumentCommand<BatchGetCommandInput, BatchGetCommandOutput> {
  readonly operation = 'BatchGetItem';
}
export class BatchWriteCommand extends DocumentCommand<BatchWriteCommandInput, BatchWriteCommandOutput> {
  readonly operation = 'BatchWriteItem';
}

type Doc = Record<string, unknown>;
type Wire = Record<string, unknown>;

const OPTIONS = { removeUndefinedValues: true } as const;
const toWire = (doc: unknown): unknown => marshall(doc as Doc, OPTIONS);
const fromWire = (item: unknown): Doc => unmarshall(item as Parameters<typeof unmarshall>[0]);
const mapValues = <T, U>(o: Record<string, T>, f: (v: T) => U): Record<string, U> => {
  const out: Record<string, U> = {};
  for (const k of Object.keys(o)) out[k] = f(o[k] as T);
  return out;
};

/** Batch requests of a table, either direction: keys (`Keys`) for BatchGet, put/delete for BatchWrite. */
function batchRequests(requests: unknown, convert: (v: unknown) => unknown): unknown {
  if (Array.isArray(requests))
    return requests.map((r: { PutRequest?: { Item: unknown }; DeleteRequest?: { Key: unknown } }) => ({
      ...(r.PutRequest ? { PutRequest: { ...r.PutRequest, Item: convert(r.PutRequest.Item) } } : {}),
      ...(r.DeleteRequest
        ? { DeleteRequest: { ...r.DeleteRequest, Key: convert(r.DeleteRequest.Key) } }
        : {}),
    }));
  const keys = requests as { Keys?: unknown[] };
  return keys.Keys ? { ...keys, Keys: keys.Keys.map(convert) } : keys;
}

/** The wire input of a document command. */
export function marshallInput(input: object): Wire {
  const out: Wire = { ...input };
  for (const field of ['Key', 'Item', 'ExpressionAttributeValues', 'ExclusiveStartKey'] as const)
    if (out[field] !== undefined) out[field] = toWire(out[field]);
  if (out.RequestItems)
    out.RequestItems = mapValues(out.RequestItems as Record<string, unknown>, (r) =>
      batchRequests(r, toWire),
    );
  return out;
}

/** The document output of a wire answer. */
export function unmarshallOutput(output: Wire): Doc {
  for (const field of ['Item', 'Attributes', 'LastEvaluatedKey'] as const)
    if (output[field] !== undefined) output[field] = fromWire(output[field]);
  if (Array.isArray(output.Items)) output.Items = output.Items.map(fromWire);
  if (output.Responses)
    output.Responses = mapValues(output.Responses as Record<string, unknown[]>, (items) =>
      items.map(fromWire),
    );
  for (const field of ['UnprocessedKeys', 'UnprocessedItems'] as const)
    if (output[field])
      output[field] = mapValues(output[field] as Record<string, unknown>, (r) => batchRequests(r, fromWire));
  return output;
}

/** The document client: `send(new GetCommand({...}))` as with `@aws-sdk/lib-dynamodb`. */
export class DocumentClient {
  constructor(readonly client: AwsJsonClient) {}

  async send<I, O>(command: DocumentCommand<I, O>): Promise<O> {
    let out: Wire;
    try {
      out = await this.client.call(command.operation, marshallInput(command.input as object));
    } catch (err) {
      const e = err as { Item?: unknown; CancellationReasons?: { Item?: unknown }[] };
      if (e.Item) e.Item = fromWire(e.Item);
      for (const reason of e.CancellationReasons ?? []) if (reason.Item) reason.Item = fromWire(reason.Item);
      throw err;
    }
    return unmarshallOutput(out) as O;
  }
}
