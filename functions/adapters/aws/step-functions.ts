import { ExecutionAlreadyExists, type SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { ConfigError } from '../../shared/errors.js';
import type { WorkflowName, Workflows } from '../../shared/ports.js';

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
}
