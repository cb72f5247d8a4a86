import { type AwsJsonClient, isAwsError } from '../../shared/aws-json.js';
import { ConfigError } from '../../shared/errors.js';
import type { TaskOutcome, WorkflowName, Workflows } from './port.js';

/*
 * The Step Functions operations sent here, as far as they are sent and read (the wire JSON of the AWS JSON
 * 1.0 protocol: shared/aws-json.ts). `StartExecution` also answers `startDate`, epoch seconds; unread.
 */
interface StartExecutionInput {
  stateMachineArn: string;
  name: string;
  /** The execution input, as JSON text. */
  input: string;
}
interface StartExecutionOutput {
  executionArn: string;
}
interface SendTaskSuccessInput {
  taskToken: string;
  /** The task's output, as JSON text. */
  output: string;
}
interface SendTaskFailureInput {
  taskToken: string;
  error: string;
  cause: string;
}
interface SendTaskHeartbeatInput {
  taskToken: string;
}

/** Step Functions cap a failure's error at 256 and its cause at 32768 characters. */
const MAX_ERROR = 256;
const MAX_CAUSE = 32_768;

/** The errors of a task token nobody waits on any more (it timed out, its execution stopped, it completed). */
const TASK_ENDED = ['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken'];
const taskEnded = (err: unknown) => isAwsError(err, ...TASK_ENDED);

/** Step Functions adapter: StartExecution on the state machine CDK wired to each workflow name. */
export class StepFunctionsWorkflows implements Workflows {
  /** `client`: a Step Functions client (`new AwsJsonClient(SFN, …)`). */
  constructor(
    private readonly client: AwsJsonClient,
    private readonly arns: Partial<Record<WorkflowName, string>>,
  ) {}

  async start(workflow: WorkflowName, input: Record<string, unknown>, name: string) {
    const stateMachineArn = this.arns[workflow];
    if (!stateMachineArn) throw new ConfigError(`no state machine ARN configured for workflow "${workflow}"`);
    try {
      const request: StartExecutionInput = { stateMachineArn, name, input: JSON.stringify(input) };
      const out = await this.client.call<StartExecutionOutput>('StartExecution', request);
      return { executionId: out.executionArn };
    } catch (err) {
      // The client's retry of this very call, after its first attempt started the execution: Step Functions
      // answers a start of a running execution of the same name and input with that execution, and this
      // error once it has closed. No other start can collide: every name carries a fresh id
      // (core/environments.ts `executionName`, core/runs.ts).
      if (isAwsError(err, 'ExecutionAlreadyExists'))
        return { executionId: `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}` };
      throw err;
    }
  }

  async heartbeat(token: string): Promise<boolean> {
    try {
      const request: SendTaskHeartbeatInput = { taskToken: token };
      await this.client.call('SendTaskHeartbeat', request);
      return true;
    } catch (err) {
      if (taskEnded(err)) return false;
      throw err;
    }
  }

  async completeTask(token: string, outcome: TaskOutcome): Promise<void> {
    try {
      if (outcome.ok) {
        const request: SendTaskSuccessInput = { taskToken: token, output: JSON.stringify(outcome.output) };
        await this.client.call('SendTaskSuccess', request);
      } else {
        const request: SendTaskFailureInput = {
          taskToken: token,
          error: outcome.error.slice(0, MAX_ERROR),
          cause: outcome.cause.slice(0, MAX_CAUSE),
        };
        await this.client.call('SendTaskFailure', request);
      }
    } catch (err) {
      // The task already ended (timed out, its execution stopped, or completed once): nothing waits on it.
      if (taskEnded(err)) return;
      throw err;
    }
  }
}
