import {
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  type SFNClient,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import { isAwsError } from '../../shared/aws/aws-errors.js';
import { ConfigError } from '../../shared/errors.js';
import type { TaskOutcome, WorkflowName, Workflows } from './port.js';

/** Step Functions cap a failure's error at 256 and its cause at 32768 characters. */
const MAX_ERROR = 256;
const MAX_CAUSE = 32_768;

/** The errors of a task token nobody waits on any more (it timed out, its execution stopped, it completed). */
const TASK_ENDED = ['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken'];
const taskEnded = (err: unknown) => isAwsError(err, ...TASK_ENDED);

/** Step Functions adapter: StartExecution on the state machine CDK wired to each workflow name. */
export class StepFunctionsWorkflows implements Workflows {
  /** `client`: the container's Step Functions client (registry/aws-clients.ts). */
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
      // The SDK's retry of this very call, after its first attempt started the execution: Step Functions
      // answers a start of a running execution of the same name and input with that execution, and this
      // error once it has closed. No other start can collide: every name carries a fresh id
      // (core/environments.ts `executionName`, core/run-lifecycle.ts).
      if (isAwsError(err, 'ExecutionAlreadyExists'))
        return { executionId: `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}` };
      throw err;
    }
  }

  async heartbeat(token: string): Promise<boolean> {
    try {
      await this.client.send(new SendTaskHeartbeatCommand({ taskToken: token }));
      return true;
    } catch (err) {
      if (taskEnded(err)) return false;
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
        await this.client.send(
          new SendTaskFailureCommand({
            taskToken: token,
            error: outcome.error.slice(0, MAX_ERROR),
            cause: outcome.cause.slice(0, MAX_CAUSE),
          }),
        );
      }
    } catch (err) {
      // The task already ended (timed out, its execution stopped, or completed once): nothing waits on it.
      if (taskEnded(err)) return;
      throw err;
    }
  }
}
