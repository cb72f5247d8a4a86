import {
  InvokeCommand,
  LambdaClient,
  ResourceNotFoundException,
  ServiceException,
  TooManyRequestsException,
} from '@aws-sdk/client-lambda';
import { afterEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { LambdaInvokeError, LambdaInvoker } from './lambda-invoke.js';

/*
 * The rollout watcher's asynchronous Lambda Invoke, at the SDK boundary (aws-sdk-client-mock): the command
 * it sends and how a failure reaches the caller. The SDK's own retries are its business (a mocked `send`
 * has none); sent for real against the fake Lambda API: eks.test.ts (the watcher's self-invocation) and
 * the cloud tier.
 */

const FN = 'arn:aws:lambda:eu-west-1:000000000000:function:rollout-watcher';
const client = new LambdaClient({
  region: 'eu-west-1',
  credentials: { accessKeyId: 'AKIAFAKE', secretAccessKey: 'fake' },
});
const lambda = mockClient(client);
afterEach(() => {
  lambda.reset();
});

const meta = (httpStatusCode: number) => ({ $metadata: { httpStatusCode } });

describe('the asynchronous Lambda Invoke', () => {
  test('is an Invoke of the function with InvocationType Event and the event as JSON', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const event = { target: { orgId: 'o' }, hop: 1, note: 'é' };
    await new LambdaInvoker(client).invokeAsync(FN, event);
    const calls = lambda.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]!.args[0].input;
    expect(input).toMatchObject({ FunctionName: FN, InvocationType: 'Event' });
    expect(JSON.parse(Buffer.from(input.Payload as Uint8Array).toString('utf8'))).toEqual(event);
  });

  test('a function Lambda does not know: a typed error naming Lambda’s error type, not retryable', async () => {
    lambda.on(InvokeCommand).rejects(
      new ResourceNotFoundException({
        message: 'Function not found: rollout-watcher',
        ...meta(404),
      }),
    );
    const err = await new LambdaInvoker(client).invokeAsync(FN, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LambdaInvokeError);
    expect(err).toMatchObject({
      name: 'ResourceNotFoundException',
      message: 'Function not found: rollout-watcher',
      status: 404,
      retryable: false,
    });
  });

  test('throttling and server errors (after the SDK’s retries) are retryable', async () => {
    lambda
      .on(InvokeCommand)
      .rejectsOnce(new TooManyRequestsException({ message: 'Rate exceeded', ...meta(429) }))
      .rejectsOnce(new ServiceException({ message: 'down', ...meta(503) }));
    const invoker = new LambdaInvoker(client);
    await expect(invoker.invokeAsync(FN, {})).rejects.toMatchObject({
      name: 'TooManyRequestsException',
      status: 429,
      retryable: true,
    });
    await expect(invoker.invokeAsync(FN, {})).rejects.toMatchObject({
      name: 'ServiceException',
      message: 'down',
      status: 503,
      retryable: true,
    });
  });

  test('no answer at all (a network failure) is retryable, status 0', async () => {
    lambda
      .on(InvokeCommand)
      .rejects(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    await expect(new LambdaInvoker(client).invokeAsync(FN, {})).rejects.toMatchObject({
      name: 'Error',
      status: 0,
      retryable: true,
    });
  });

  test('an unexpected success status (not 202) is an error too', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 200 });
    await expect(new LambdaInvoker(client).invokeAsync(FN, {})).rejects.toMatchObject({
      name: 'UnexpectedStatus',
      status: 200,
      retryable: false,
    });
  });
});
