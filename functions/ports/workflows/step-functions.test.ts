import {
  ExecutionAlreadyExists,
  InvalidToken,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  SFNClient,
  SFNServiceException,
  StartExecutionCommand,
  StateMachineDoesNotExist,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { ConfigError } from '../../shared/errors.js';
import { StepFunctionsWorkflows } from './step-functions.js';
import { workflowsContract } from './workflows.contract.js';

/*
 * Step Functions at the SDK boundary: aws-sdk-client-mock on the adapter's SFNClient records each command
 * (its input) and answers as each test scripts the service, an error as the SDK raises it (the modeled
 * exception class of its code). The SDK's own retries are not run under the mock; the container's client
 * against a loopback Step Functions is registry/aws-clients.test.ts.
 */

const client = new SFNClient({ region: 'eu-west-1' });
const stepFunctions = mockClient(client);
beforeEach(() => {
  stepFunctions.reset();
});

const meta = { $metadata: { httpStatusCode: 400 } };
/** The modeled errors of a task token nobody waits on, by code. */
const ENDED = {
  TaskDoesNotExist: () => new TaskDoesNotExist({ message: 'Task does not exist anymore', ...meta }),
  TaskTimedOut: () => new TaskTimedOut({ message: 'Task Timed Out', ...meta }),
  InvalidToken: () => new InvalidToken({ message: 'Invalid Token', ...meta }),
};
/** An error code Step Functions does not model for the operation (AccessDeniedException, ThrottlingException). */
const unmodeled = (name: string, message: string) =>
  new SFNServiceException({ name, message, $fault: 'client', ...meta });

const inputsOf = (command: Parameters<typeof stepFunctions.commandCalls>[0]) =>
  stepFunctions.commandCalls(command).map((call) => call.args[0].input);

workflowsContract('StepFunctionsWorkflows', () => {
  // Step Functions as it answers: an ARN per execution name; an unknown task token is TaskDoesNotExist.
  stepFunctions.on(StartExecutionCommand).callsFake(({ stateMachineArn, name }) => ({
    executionArn: `${stateMachineArn}:${name}`.replace(':stateMachine:', ':execution:'),
    startDate: new Date(),
  }));
  stepFunctions.on(SendTaskSuccessCommand).rejects(ENDED.TaskDoesNotExist());
  stepFunctions.on(SendTaskFailureCommand).rejects(ENDED.TaskDoesNotExist());
  stepFunctions.on(SendTaskHeartbeatCommand).rejects(ENDED.TaskDoesNotExist());
  const arn = (n: string) => `arn:aws:states:eu-west-1:123456789012:stateMachine:${n}`;
  return new StepFunctionsWorkflows(client, {
    deploy: arn('deploy'),
    teardown: arn('teardown'),
    redeployApp: arn('redeploy-app'),
  });
});

describe('StepFunctionsWorkflows', () => {
  const arns = { deploy: 'arn:aws:states:eu-west-1:1:stateMachine:deploy' };
  const workflows = () => new StepFunctionsWorkflows(client, arns);

  test('starts an execution of the configured machine with a JSON input and a name', async () => {
    stepFunctions.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec', startDate: new Date() });
    expect(await workflows().start('deploy', { a: 1 }, 'deploy-7')).toEqual({ executionId: 'arn:exec' });
    expect(stepFunctions.calls()).toHaveLength(1);
    expect(inputsOf(StartExecutionCommand)).toEqual([
      { stateMachineArn: arns.deploy, name: 'deploy-7', input: '{"a":1}' },
    ]);
  });

  test('a retried start of an execution that has closed since counts as started: its execution ARN', async () => {
    stepFunctions
      .on(StartExecutionCommand)
      .rejects(new ExecutionAlreadyExists({ message: 'Execution Already Exists', ...meta }));
    expect(await workflows().start('deploy', {}, 'n')).toEqual({
      executionId: 'arn:aws:states:eu-west-1:1:execution:deploy:n',
    });
  });

  test('other start errors propagate, named by their code', async () => {
    stepFunctions
      .on(StartExecutionCommand)
      .rejects(new StateMachineDoesNotExist({ message: 'no such machine', ...meta }));
    await expect(workflows().start('deploy', {}, 'n')).rejects.toMatchObject({
      name: 'StateMachineDoesNotExist',
      message: 'no such machine',
    });
  });

  test('a workflow without a configured machine is a configuration error', async () => {
    await expect(workflows().start('teardown', {}, 'n')).rejects.toBeInstanceOf(ConfigError);
    expect(stepFunctions.calls()).toEqual([]);
  });

  describe('heartbeat', () => {
    test('sends SendTaskHeartbeat with the token; true while the task waits', async () => {
      stepFunctions.on(SendTaskHeartbeatCommand).resolves({});
      expect(await workflows().heartbeat('tok-h')).toBe(true);
      expect(stepFunctions.calls()).toHaveLength(1);
      expect(inputsOf(SendTaskHeartbeatCommand)).toEqual([{ taskToken: 'tok-h' }]);
    });

    test.each(Object.keys(ENDED) as (keyof typeof ENDED)[])(
      '%s (the task already ended): false',
      async (code) => {
        stepFunctions.on(SendTaskHeartbeatCommand).rejects(ENDED[code]());
        expect(await workflows().heartbeat('tok')).toBe(false);
      },
    );

    test('other errors propagate', async () => {
      stepFunctions.on(SendTaskHeartbeatCommand).rejects(unmodeled('AccessDeniedException', 'not allowed'));
      await expect(workflows().heartbeat('tok')).rejects.toMatchObject({ name: 'AccessDeniedException' });
    });
  });

  describe('completeTask', () => {
    test('a success sends SendTaskSuccess with the output as JSON', async () => {
      stepFunctions.on(SendTaskSuccessCommand).resolves({});
      await workflows().completeTask('tok-1', { ok: true, output: { urls: { web: 'https://w' } } });
      expect(stepFunctions.calls()).toHaveLength(1);
      expect(inputsOf(SendTaskSuccessCommand)).toEqual([
        { taskToken: 'tok-1', output: '{"urls":{"web":"https://w"}}' },
      ]);
    });

    test('a failure sends SendTaskFailure with its error and cause', async () => {
      stepFunctions.on(SendTaskFailureCommand).resolves({});
      await workflows().completeTask('tok-2', { ok: false, error: 'DeployFailed', cause: 'build failed' });
      expect(stepFunctions.calls()).toHaveLength(1);
      expect(inputsOf(SendTaskFailureCommand)).toEqual([
        { taskToken: 'tok-2', error: 'DeployFailed', cause: 'build failed' },
      ]);
    });

    test('error and cause are cut to the 256 and 32768 characters Step Functions accepts', async () => {
      stepFunctions.on(SendTaskFailureCommand).resolves({});
      const error = `E${'x'.repeat(400)}`;
      const cause = `C${'y'.repeat(40_000)}`;
      await workflows().completeTask('tok-3', { ok: false, error, cause });
      const input = inputsOf(SendTaskFailureCommand)[0]!;
      expect(input.taskToken).toBe('tok-3');
      expect(input.error).toBe(error.slice(0, 256));
      expect(input.error).toHaveLength(256);
      expect(input.cause).toBe(cause.slice(0, 32_768));
      expect(input.cause).toHaveLength(32_768);
    });

    test('error and cause at or under the limits are sent unchanged', async () => {
      stepFunctions.on(SendTaskFailureCommand).resolves({});
      const error = 'e'.repeat(256);
      const cause = 'c'.repeat(32_768);
      await workflows().completeTask('tok-4', { ok: false, error, cause });
      expect(inputsOf(SendTaskFailureCommand)).toEqual([{ taskToken: 'tok-4', error, cause }]);
    });

    const ended = Object.keys(ENDED) as (keyof typeof ENDED)[];

    test.each(ended)('%s (the task already ended) is swallowed on success', async (code) => {
      stepFunctions.on(SendTaskSuccessCommand).rejects(ENDED[code]());
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).resolves.toBeUndefined();
      expect(inputsOf(SendTaskSuccessCommand)).toHaveLength(1);
    });

    test.each(ended)('%s (the task already ended) is swallowed on failure', async (code) => {
      stepFunctions.on(SendTaskFailureCommand).rejects(ENDED[code]());
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).resolves.toBeUndefined();
      expect(inputsOf(SendTaskFailureCommand)).toHaveLength(1);
    });

    test('other errors propagate, named by their code (a throttle past the SDK retries, a denial)', async () => {
      stepFunctions.on(SendTaskSuccessCommand).rejects(unmodeled('ThrottlingException', 'Rate exceeded'));
      stepFunctions.on(SendTaskFailureCommand).rejects(unmodeled('AccessDeniedException', 'not allowed'));
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).rejects.toMatchObject({
        name: 'ThrottlingException',
        message: 'Rate exceeded',
      });
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).rejects.toMatchObject({ name: 'AccessDeniedException', message: 'not allowed' });
      expect(inputsOf(SendTaskSuccessCommand)).toHaveLength(1);
      expect(inputsOf(SendTaskFailureCommand)).toHaveLength(1);
    });
  });
});
