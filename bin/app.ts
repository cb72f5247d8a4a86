import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { addPreviewStacks } from '../lib/cdk/app.js';

// The CDK app (cdk.json: `npx tsx bin/app.ts`): a stateful stack (tables, GitHub App secret, image
// repository) and a stateless stack (functions, state machines, API, image builds) per stage.
// `npx cdk synth -c stage=prod` for another stage; lib/cdk/app.ts lists the other context keys.
const app = new App();
addPreviewStacks(app);
// cdk-nag's AWS Solutions rules run on every synth and deploy: an unacknowledged finding fails it (the
// infra tests run the same checks). Acknowledgments, each with its reason, sit next to their resources.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
