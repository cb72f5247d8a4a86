import {
  ExecutionAlreadyExists,
  InvalidToken,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  SFNClient,
  StartExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { ConfigError } from '../../shared/errors.js';
import { StepFunctionsWorkflows } from './step-functions.js';
import { workflowsContract } from './workflows.contract.js';

const sfn = mockClient(SFNClient);

beforeEach(() => {
  sfn.reset();
});

workflowsContract('StepFunctionsWorkflows', () => {
  // Step Functions as it answers: an ARN per execution name; an unknown task token is TaskDoesNotExist.
  sfn.on(StartExecutionCommand).callsFake(({ stateMachineArn, name }) => ({
    executionArn: `${stateMachineArn}:${name}`.replace(':stateMachine:', ':execution:'),
    startDate: new Date(),
  }));
  const gone = () => new TaskDoesNotExist({ message: 'Task does not exist anymore', $metadata: {} });
  sfn.on(SendTaskSuccessCommand).rejects(gone());
  sfn.on(SendTaskFailureCommand).rejects(gone());
  sfn.on(SendTaskHeartbeatCommand).rejects(gone());
  const arn = (n: string) => `arn:aws:states:eu-west-1:123456789012:stateMachine:${n}`;
  return new StepFunctionsWorkflows(new SFNClient({ region: 'eu-west-1' }), {
    deploy: arn('deploy'),
    teardown: arn('teardown'),
    redeployApp: arn('redeploy-app'),
  });
});

describe('StepFunctionsWorkflows', () => {
  const arns = { deploy: 'arn:aws:states:eu-west-1:1:stateMachine:deploy' };
  const workflows = () => new StepFunctionsWorkflows(new SFNClient({ region: 'eu-west-1' }), arns);

  test('starts an execution of the configured machine with a JSON input and a name', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn:exec', startDate: new Date() });
    expect(await workflows().start('deploy', { a: 1 }, 'deploy-7')).toEqual({ executionId: 'arn:exec' });
    expect(sfn.commandCalls(StartExecutionCommand)[0]!.args[0].input).toEqual({
      stateMachineArn: arns.deploy,
      name: 'deploy-7',
      input: '{"a":1}',
    });
  });

  test('a retried start of the same execution counts as started', async () => {
    sfn.on(StartExecutionCommand).rejects(new ExecutionAlreadyExists({ message: 'exists', $metadata: {} }));
    expect(await workflows().start('deploy', {}, 'n')).toEqual({ executionId: `${arns.deploy}:n` });
  });

  test('a workflow without a configured machine is a configuration error', async () => {
    await expect(workflows().start('teardown', {}, 'n')).rejects.toBeInstanceOf(ConfigError);
  });

  describe('completeTask', () => {
    test('a success sends SendTaskSuccess with the output as JSON', async () => {
      sfn.on(SendTaskSuccessCommand).resolves({});
      await workflows().completeTask('tok-1', { ok: true, output: { urls: { web: 'https://w' } } });
      expect(sfn.commandCalls(SendTaskSuccessCommand).map((c) => c.args[0].input)).toEqual([
        { taskToken: 'tok-1', output: '{"urls":{"web":"https://w"}}' },
      ]);
      expect(sfn.commandCalls(SendTaskFailureCommand)).toHaveLength(0);
    });

    test('a failure sends SendTaskFailure with its error and cause', async () => {
      sfn.on(SendTaskFailureCommand).resolves({});
      await workflows().completeTask('tok-2', { ok: false, error: 'DeployFailed', cause: 'build failed' });
      expect(sfn.commandCalls(SendTaskFailureCommand).map((c) => c.args[0].input)).toEqual([
        { taskToken: 'tok-2', error: 'DeployFailed', cause: 'build failed' },
      ]);
      expect(sfn.commandCalls(SendTaskSuccessCommand)).toHaveLength(0);
    });

    test('error and cause are cut to the 256 and 32768 characters Step Functions accepts', async () => {
      sfn.on(SendTaskFailureCommand).resolves({});
      const error = `E${'x'.repeat(400)}`;
      const cause = `C${'y'.repeat(40_000)}`;
      await workflows().completeTask('tok-3', { ok: false, error, cause });
      const input = sfn.commandCalls(SendTaskFailureCommand)[0]!.args[0].input;
      expect(input.taskToken).toBe('tok-3');
      expect(input.error).toBe(error.slice(0, 256));
      expect(input.error).toHaveLength(256);
      expect(input.cause).toBe(cause.slice(0, 32_768));
      expect(input.cause).toHaveLength(32_768);
    });

    test('error and cause at or under the limits are sent unchanged', async () => {
      sfn.on(SendTaskFailureCommand).resolves({});
      const error = 'e'.repeat(256);
      const cause = 'c'.repeat(32_768);
      await workflows().completeTask('tok-4', { ok: false, error, cause });
      expect(sfn.commandCalls(SendTaskFailureCommand)[0]!.args[0].input).toEqual({
        taskToken: 'tok-4',
        error,
        cause,
      });
    });

    const ended = [
      ['TaskDoesNotExist', () => new TaskDoesNotExist({ message: 'no such task', $metadata: {} })],
      ['TaskTimedOut', () => new TaskTimedOut({ message: 'timed out', $metadata: {} })],
      ['InvalidToken', () => new InvalidToken({ message: 'invalid token', $metadata: {} })],
    ] as const;

    test.each(ended)('%s (the task already ended) is swallowed on success', async (_name, make) => {
      sfn.on(SendTaskSuccessCommand).rejects(make());
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).resolves.toBeUndefined();
      expect(sfn.commandCalls(SendTaskSuccessCommand)).toHaveLength(1);
    });

    test.each(ended)('%s (the task already ended) is swallowed on failure', async (_name, make) => {
      sfn.on(SendTaskFailureCommand).rejects(make());
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).resolves.toBeUndefined();
      expect(sfn.commandCalls(SendTaskFailureCommand)).toHaveLength(1);
    });

    test('other errors propagate', async () => {
      sfn.on(SendTaskSuccessCommand).rejects(new Error('throttled'));
      sfn.on(SendTaskFailureCommand).rejects(new Error('access denied'));
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).rejects.toThrow('throttled');
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).rejects.toThrow('access denied');
    });
  });
});
