import { beforeEach, describe, expect, test } from '@jest/globals';
import { FakeJsonService, Fault } from '../../../test/support/aws-json-fake.js';
import { SFN } from '../../shared/aws-json.js';
import { ConfigError } from '../../shared/errors.js';
import { StepFunctionsWorkflows } from './step-functions.js';
import { workflowsContract } from './workflows.contract.js';

/*
 * Step Functions at the HTTP boundary: the adapter's AwsJsonClient sends its requests to a FakeJsonService
 * that records each one (the operation of its X-Amz-Target, its JSON input) and answers as each test
 * scripts the service, an error as `{ "__type": <code>, "message": … }` with its HTTP status.
 */

const stepFunctions = new FakeJsonService(SFN);
beforeEach(() => stepFunctions.reset());

workflowsContract('StepFunctionsWorkflows', () => {
  // Step Functions as it answers: an ARN per execution name; an unknown task token is TaskDoesNotExist.
  stepFunctions.on('StartExecution', ({ stateMachineArn, name }) => ({
    executionArn: `${stateMachineArn}:${name}`.replace(':stateMachine:', ':execution:'),
    startDate: Date.now() / 1000,
  }));
  const gone = () => new Fault('TaskDoesNotExist', 'Task does not exist anymore');
  stepFunctions.on('SendTaskSuccess', gone);
  stepFunctions.on('SendTaskFailure', gone);
  stepFunctions.on('SendTaskHeartbeat', gone);
  const arn = (n: string) => `arn:aws:states:eu-west-1:123456789012:stateMachine:${n}`;
  return new StepFunctionsWorkflows(stepFunctions.client(), {
    deploy: arn('deploy'),
    teardown: arn('teardown'),
    redeployApp: arn('redeploy-app'),
  });
});

describe('StepFunctionsWorkflows', () => {
  const arns = { deploy: 'arn:aws:states:eu-west-1:1:stateMachine:deploy' };
  const workflows = () => new StepFunctionsWorkflows(stepFunctions.client(), arns);

  test('starts an execution of the configured machine with a JSON input and a name', async () => {
    stepFunctions.on('StartExecution', () => ({ executionArn: 'arn:exec', startDate: 1_700_000_000.123 }));
    expect(await workflows().start('deploy', { a: 1 }, 'deploy-7')).toEqual({ executionId: 'arn:exec' });
    expect(stepFunctions.sent).toEqual([
      {
        operation: 'StartExecution',
        input: { stateMachineArn: arns.deploy, name: 'deploy-7', input: '{"a":1}' },
      },
    ]);
  });

  test('a retried start of an execution that has closed since counts as started: its execution ARN', async () => {
    stepFunctions.on('StartExecution', () => new Fault('ExecutionAlreadyExists', 'exists'));
    expect(await workflows().start('deploy', {}, 'n')).toEqual({
      executionId: 'arn:aws:states:eu-west-1:1:execution:deploy:n',
    });
  });

  test('other start errors propagate, named by their code', async () => {
    stepFunctions.on('StartExecution', () => new Fault('StateMachineDoesNotExist', 'no such machine'));
    await expect(workflows().start('deploy', {}, 'n')).rejects.toMatchObject({
      name: 'StateMachineDoesNotExist',
      message: 'no such machine',
    });
  });

  test('a workflow without a configured machine is a configuration error', async () => {
    await expect(workflows().start('teardown', {}, 'n')).rejects.toBeInstanceOf(ConfigError);
    expect(stepFunctions.sent).toEqual([]);
  });

  describe('heartbeat', () => {
    test('sends SendTaskHeartbeat with the token; true while the task waits', async () => {
      stepFunctions.on('SendTaskHeartbeat', () => ({}));
      expect(await workflows().heartbeat('tok-h')).toBe(true);
      expect(stepFunctions.sent).toEqual([{ operation: 'SendTaskHeartbeat', input: { taskToken: 'tok-h' } }]);
    });

    test.each(['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken'])(
      '%s (the task already ended): false',
      async (code) => {
        stepFunctions.on('SendTaskHeartbeat', () => new Fault(code, 'ended'));
        expect(await workflows().heartbeat('tok')).toBe(false);
      },
    );

    test('other errors propagate', async () => {
      stepFunctions.on('SendTaskHeartbeat', () => new Fault('AccessDeniedException', 'not allowed'));
      await expect(workflows().heartbeat('tok')).rejects.toMatchObject({ name: 'AccessDeniedException' });
    });
  });

  describe('completeTask', () => {
    test('a success sends SendTaskSuccess with the output as JSON', async () => {
      stepFunctions.on('SendTaskSuccess', () => ({}));
      await workflows().completeTask('tok-1', { ok: true, output: { urls: { web: 'https://w' } } });
      expect(stepFunctions.sent).toEqual([
        {
          operation: 'SendTaskSuccess',
          input: { taskToken: 'tok-1', output: '{"urls":{"web":"https://w"}}' },
        },
      ]);
    });

    test('a failure sends SendTaskFailure with its error and cause', async () => {
      stepFunctions.on('SendTaskFailure', () => ({}));
      await workflows().completeTask('tok-2', { ok: false, error: 'DeployFailed', cause: 'build failed' });
      expect(stepFunctions.sent).toEqual([
        {
          operation: 'SendTaskFailure',
          input: { taskToken: 'tok-2', error: 'DeployFailed', cause: 'build failed' },
        },
      ]);
    });

    test('error and cause are cut to the 256 and 32768 characters Step Functions accepts', async () => {
      stepFunctions.on('SendTaskFailure', () => ({}));
      const error = `E${'x'.repeat(400)}`;
      const cause = `C${'y'.repeat(40_000)}`;
      await workflows().completeTask('tok-3', { ok: false, error, cause });
      const input = stepFunctions.sentOf('SendTaskFailure')[0]!;
      expect(input.taskToken).toBe('tok-3');
      expect(input.error).toBe(error.slice(0, 256));
      expect(input.error).toHaveLength(256);
      expect(input.cause).toBe(cause.slice(0, 32_768));
      expect(input.cause).toHaveLength(32_768);
    });

    test('error and cause at or under the limits are sent unchanged', async () => {
      stepFunctions.on('SendTaskFailure', () => ({}));
      const error = 'e'.repeat(256);
      const cause = 'c'.repeat(32_768);
      await workflows().completeTask('tok-4', { ok: false, error, cause });
      expect(stepFunctions.sentOf('SendTaskFailure')).toEqual([{ taskToken: 'tok-4', error, cause }]);
    });

    const ended = ['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken'];

    test.each(ended)('%s (the task already ended) is swallowed on success', async (code) => {
      stepFunctions.on('SendTaskSuccess', () => new Fault(code, 'ended'));
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).resolves.toBeUndefined();
      expect(stepFunctions.sentOf('SendTaskSuccess')).toHaveLength(1);
    });

    test.each(ended)('%s (the task already ended) is swallowed on failure', async (code) => {
      stepFunctions.on('SendTaskFailure', () => new Fault(code, 'ended'));
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).resolves.toBeUndefined();
      expect(stepFunctions.sentOf('SendTaskFailure')).toHaveLength(1);
    });

    test('other errors propagate (after the standard retries when the service is throttling)', async () => {
      stepFunctions.on('SendTaskSuccess', () => new Fault('ThrottlingException', 'Rate exceeded'));
      stepFunctions.on('SendTaskFailure', () => new Fault('AccessDeniedException', 'not allowed'));
      await expect(workflows().completeTask('tok', { ok: true, output: {} })).rejects.toMatchObject({
        name: 'ThrottlingException',
        message: 'Rate exceeded',
      });
      expect(stepFunctions.sentOf('SendTaskSuccess')).toHaveLength(3);
      await expect(
        workflows().completeTask('tok', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).rejects.toMatchObject({ name: 'AccessDeniedException', message: 'not allowed' });
      expect(stepFunctions.sentOf('SendTaskFailure')).toHaveLength(1);
    });
  });
});
