import { config } from '../../shared/config.js';
import { StepFunctionsWorkflows } from '../workflows/step-functions.js';
import { adapter } from './adapters.js';
import { sfnClient } from './aws-clients.js';

/** The state machines (AWS: Step Functions, STATE_MACHINE_*_ARN; the container’s Step Functions client, aws-clients.ts). */
export const workflows = /* @__PURE__ */ adapter(
  'workflows',
  () => new StepFunctionsWorkflows(sfnClient(), config().stateMachines),
);
