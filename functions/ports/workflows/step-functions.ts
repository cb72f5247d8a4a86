import {
  ExecutionAlreadyExists,
  InvalidToken,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  type SFNClient,
  StartExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import { ConfigError } from '../../shared/errors.js';
import type { TaskOutcome, WorkflowName, Workflows } from './port.js';

/** Step Functions adapter: StartExecution on the state machine CDK wired to each workflow name. */
export class StepFunctionsWorkflows implements Workflows {
  constructor(
    private readonly client: SFNClient,
    private readonly arns: Partial<Record<WorkflowName, string>>,
  ) {}

  async start(workflow: WorkflowName, input: Record<string, unknown>, name: string) {
    const stateMachineArn = this.arns[workflow];
    if (!stateMachineArn) throw new ConfigError(`no state machine ARN configured for workflow "${workflow}"`);
    try {
      const out = await this.client.send(
        new StartExecutionCommand({ stateMachineArn, name, input: JSON.stringify(input) }),
      );
      return { executionId: out.executionArn! };
    } catch (err) {
      // Same name and input: a retried start of the same request. Treat as started.
      if (err instanceof ExecutionAlreadyExists) return { executionId: `${stateMachineArn}:${name}` };
      throw err;
    }
  }

  async heartbeat(token: string): Promise<boolean> {
    try {
      await this.client.send(new SendTaskHeartbeatCommand({ taskToken: token }));
      return true;
    } catch (err) {
      if (err instanceof TaskDoesNotExist || err instanceof TaskTimedOut || err instanceof InvalidToken)
        return false;
      throw err;
    }
  }

  async completeTask(token: string, outcome: TaskOutcome): Promise<void> {
    try {
      if (outcome.ok) {
        await this.client.send(
          new SendTaskSuccessCommand({ taskToken: token, output: JSON.stringify(outcome.output) }),
        );
      } else {
        // Step Functions caps error at 256 and cause at 32768 characters.
        await this.client.send(
          new SendTaskFailureCommand({
            taskToken: token,
            error: outcome.error.slice(0, 256),
            cause: outcome.cause.slice(0, 32_768),
          }),
        );
      }
    } catch (err) {
      // The task already ended (timed out, its execution stopped, or completed once): nothing waits on it.
      if (err instanceof TaskDoesNotExist || err instanceof TaskTimedOut || err instanceof InvalidToken)
        return;
      throw err;
    }
  }
}
