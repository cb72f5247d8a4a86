import { SFNClient } from '@aws-sdk/client-sfn';
import { config } from '../../shared/config.js';
import { StepFunctionsWorkflows } from '../workflows/step-functions.js';
import { adapter } from './adapters.js';

/** The state machines (AWS: Step Functions, STATE_MACHINE_*_ARN). */
export const workflows = /* @__PURE__ */ adapter(
  'workflows',
  () => new StepFunctionsWorkflows(new SFNClient({ region: config().region }), config().stateMachines),
);
