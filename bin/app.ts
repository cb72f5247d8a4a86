import { App } from 'aws-cdk-lib';
import { addPreviewStacks } from '../lib/cdk/app.js';

// The CDK app (cdk.json: `npx tsx bin/app.ts`): a stateful stack (tables) and a stateless stack (functions,
// state machines, API) per stage. `npx cdk synth -c stage=prod` for another stage.
addPreviewStacks(new App());
