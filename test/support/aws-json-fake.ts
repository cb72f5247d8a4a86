import { Readable } from 'node:stream';
import type { HttpRequest } from '@smithy/types';
import {
  AwsJsonClient,
  type AwsJsonClientOptions,
  type JsonService,
} from '../../functions/shared/aws-json.js';

/**
 * A fake AWS JSON-protocol service at the HTTP boundary, for unit tests of adapters built on `AwsJsonClient`.
 * It implements the protocol's wire shape and nothing else. It takes the operation from
 * `X-Amz-Target: <targetPrefix>.<Operation>` and the input from the JSON body, and records both in `sent`.
 * A success is answered as 200 with the answer as JSON. A `Fault` is answered as its status with
 * `{ "__type": code, "message": message }`. Every answer carries `x-amzn-requestid: REQUEST_ID`. An
 * operation with no answer is `UnknownOperationException`. A request whose target prefix or content type is
 * not this service's makes the handler throw. Each test scripts the service's own behaviour (state, which
 * error when) with `on`.
 */

/** An error answer of the service: its code (`__type`), message and HTTP status. */
export class Fault {
  constructor(
    readonly code: string,
    readonly message: string,
    readonly status = 400,
  ) {}
}

/** The JSON input of a request, as the client sent it. */
export type Input = Record<string, any>;
/** How the service answers one operation: its output, or a `Fault`. */
export type Answer = (input: Input) => object | Fault;
/** One request the service received. */
export interface Sent {
  operation: string;
  input: Input;
}

/** The `x-amzn-requestid` of every answer (the client reports it in `$metadata.requestId`). */
export const REQUEST_ID = 'req-1';

/** One JSON-protocol service (`DYNAMODB`, `SFN`, `SECRETS_MANAGER`…) answering as each test scripts it. */
export class FakeJsonService {
  /** What was sent, in order. `reset()` empties this array in place, so a reference to it stays valid. */
  readonly sent: Sent[] = [];
  private readonly answers = new Map<string, Answer>();

  constructor(readonly service: JsonService) {}

  /** Answer `operation` with `answer` from now on, replacing any earlier answer. */
  on(operation: string, answer: Answer): this {
    this.answers.set(operation, answer);
    return this;
  }

  /** The inputs sent to `operation`, in order. */
  sentOf(operation: string): Input[] {
    return this.sent.filter((s) => s.operation === operation).map((s) => s.input);
  }

  /** Forget what was sent and every answer. */
  reset(): void {
    this.sent.length = 0;
    this.answers.clear();
  }

  /** The HTTP handler to give an `AwsJsonClient` (`client()` does). */
  readonly handler: NonNullable<AwsJsonClientOptions['handler']> = {
    handle: async (request: HttpRequest) => {
      const { targetPrefix, version } = this.service;
      const target = String(request.headers['x-amz-target']);
      const contentType = `application/x-amz-json-${version}`;
      if (!target.startsWith(`${targetPrefix}.`) || request.headers['content-type'] !== contentType)
        throw new Error(
          `FakeJsonService(${this.service.id}): got X-Amz-Target ${target} and Content-Type ` +
            `${request.headers['content-type']}, expected ${targetPrefix}.<Operation> and ${contentType}`,
        );
      const operation = target.slice(targetPrefix.length + 1);
      const input = JSON.parse(String(request.body)) as Input;
      this.sent.push({ operation, input });
      const answer =
        this.answers.get(operation)?.(input) ?? new Fault('UnknownOperationException', operation);
      const [status, body] =
        answer instanceof Fault
          ? [answer.status, { __type: answer.code, message: answer.message }]
          : [200, answer];
      return {
        response: {
          statusCode: status,
          headers: { 'content-type': contentType, 'x-amzn-requestid': REQUEST_ID },
          body: Readable.from([Buffer.from(JSON.stringify(body))]),
        },
      };
    },
  };

  /** A client of this service that sends to `handler`, with test credentials and retries that do not wait. */
  client(): AwsJsonClient {
    return new AwsJsonClient(this.service, {
      region: 'eu-west-1',
      credentials: async () => ({ accessKeyId: 'test', secretAccessKey: 'test' }),
      handler: this.handler,
      retry: { backoffMs: () => 0, sleep: async () => undefined },
    });
  }
}
