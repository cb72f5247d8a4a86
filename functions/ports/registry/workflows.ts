import { AwsJsonClient, SFN } from '../../shared/aws-json.js';
import { config } from '../../shared/config.js';
import { StepFunctionsWorkflows } from '../workflows/step-functions.js';
import { adapter } from './adapters.js';

/** The state machines (AWS: Step Functions, STATE_MACHINE_*_ARN; its client created with the adapter). */
export const workflows = /* @__PURE__ */ adapter(
  'workflows',
  () =>
    new StepFunctionsWorkflows(new AwsJsonClient(SFN, { region: config().region }), config().stateMachines),
);
