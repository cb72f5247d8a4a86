import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { ExecutionAlreadyExists, SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { SecretsManagerStore } from '../../functions/adapters/aws/secrets-manager.js';
import { StepFunctionsWorkflows } from '../../functions/adapters/aws/step-functions.js';
import { ConfigError } from '../../functions/shared/errors.js';

const sm = mockClient(SecretsManagerClient);
const sfn = mockClient(SFNClient);
const notFound = () => new ResourceNotFoundException({ message: 'not found', $metadata: {} });
const ref = { applicationId: 'app1', app: 'web' };

beforeEach(() => {
  sm.reset();
  sfn.reset();
});

describe('SecretsManagerStore', () => {
  const store = () => new SecretsManagerStore(new SecretsManagerClient({ region: 'eu-west-1' }), 'preview');

  test('reads one secret per (application, app) as a JSON object', async () => {
    sm.on(GetSecretValueCommand, { SecretId: 'preview/app1/web' }).resolves({ SecretString: '{"A":"1"}' });
    expect(await store().read(ref)).toEqual({ A: '1' });
  });

  test('a bundle that was never written reads as undefined', async () => {
    sm.on(GetSecretValueCommand).rejects(notFound());
    expect(await store().read(ref)).toBeUndefined();
  });

  test('writes the whole bundle with PutSecretValue', async () => {
    sm.on(PutSecretValueCommand).resolves({});
    await store().write(ref, { A: '1', B: '2' });
    expect(sm.commandCalls(PutSecretValueCommand)[0]!.args[0].input).toEqual({
      SecretId: 'preview/app1/web',
      SecretString: '{"A":"1","B":"2"}',
    });
    expect(sm.commandCalls(CreateSecretCommand)).toHaveLength(0);
  });

  test('creates the secret, tagged, on the first write', async () => {
    sm.on(PutSecretValueCommand).rejects(notFound());
    sm.on(CreateSecretCommand).resolves({});
    await store().write(ref, { A: '1' });
    const input = sm.commandCalls(CreateSecretCommand)[0]!.args[0].input;
    expect(input).toMatchObject({ Name: 'preview/app1/web', SecretString: '{"A":"1"}' });
    expect(input.Tags).toEqual([
      { Key: 'preview:applicationId', Value: 'app1' },
      { Key: 'preview:app', Value: 'web' },
    ]);
  });

  test('other errors propagate', async () => {
    sm.on(GetSecretValueCommand).rejects(new Error('throttled'));
    await expect(store().read(ref)).rejects.toThrow('throttled');
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
});
