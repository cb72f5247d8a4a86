import { type App, Tags } from 'aws-cdk-lib';
import { StatefulStack } from './stateful-stack.js';
import { StatelessStack } from './stateless-stack.js';

export interface PreviewStacks {
  stage: string;
  stateful: StatefulStack;
  stateless: StatelessStack;
}

const stagePattern = /^[a-z][a-z0-9-]{0,19}$/;

/**
 * Add the control plane's two stacks to an app. Context (`cdk synth -c stage=prod`):
 * - `stage` (default `dev`): prefixes the stack names, so several stages coexist in one account;
 * - `secretNamePrefix` (default `preview/<stage>`): where this stage's secret bundles live;
 * - `apiGatewayCloudWatchRole` (default true): set to false when the account already has the
 *   API Gateway logging role.
 * Env-agnostic (no account or region, no lookups): synthesis never calls AWS.
 */
export function addPreviewStacks(app: App): PreviewStacks {
  const stage = String(app.node.tryGetContext('stage') ?? 'dev');
  if (!stagePattern.test(stage)) {
    throw new Error(`context "stage" must match ${stagePattern} (got "${stage}")`);
  }
  const secretNamePrefix = String(app.node.tryGetContext('secretNamePrefix') ?? `preview/${stage}`);
  const cloudWatchRole = app.node.tryGetContext('apiGatewayCloudWatchRole');

  const stateful = new StatefulStack(app, `preview-${stage}-stateful`, {
    description: `Preview control plane (${stage}): tables, retained`,
  });
  const stateless = new StatelessStack(app, `preview-${stage}-stateless`, {
    description: `Preview control plane (${stage}): functions, state machines and API`,
    tables: stateful.tables,
    secretNamePrefix,
    apiGatewayCloudWatchRole: cloudWatchRole === undefined ? true : String(cloudWatchRole) !== 'false',
  });
  for (const stack of [stateful, stateless]) {
    Tags.of(stack).add('project', 'preview-control-plane');
    Tags.of(stack).add('stage', stage);
  }
  return { stage, stateful, stateless };
}
