import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { CodeBuildClient } from '@aws-sdk/client-codebuild';
import { ECRClient } from '@aws-sdk/client-ecr';
import { EKSClient } from '@aws-sdk/client-eks';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { config } from '../../shared/config.js';
import { once } from './adapters.js';

/*
 * The AWS SDK v3 client of each service this container calls: created on first use, then shared by every
 * adapter that calls the service (one connection pool per service, whichever getters a handler uses: the
 * secret store, the GitHub App key and the run-link key all read Secrets Manager through one client).
 *
 * Each getter is its own top-level function and the client packages are side-effect free, so a Lambda
 * bundle carries only the clients its handler's getters call (esbuild drops the rest; `npm run
 * check:bundles` holds each bundle to its budget).
 *
 * Everything else is the SDK's own: the standard retry mode (3 attempts, jittered backoff, the retry
 * token bucket), clock-skew correction, the endpoint rules (partitions, FIPS and dual-stack settings), and
 * `AWS_ENDPOINT_URL_<SERVICE>` / `AWS_ENDPOINT_URL` (unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`):
 * nothing here reads those variables. Credentials: the SDK's default chain; in a Lambda bundle that chain
 * is the environment alone (lib/cdk/bundling.ts aliases it to shared/aws/lambda-credentials.ts).
 *
 * DynamoDB's document client lives in shared/aws/dynamo.ts (`ddb()`), because use cases in core/ query it.
 */

/** Settings every client gets: the configured region (validated once in shared/config.ts). */
function clientConfig() {
  return { region: config().region };
}

export const secretsManagerClient = /* @__PURE__ */ once(() => new SecretsManagerClient(clientConfig()));
export const sfnClient = /* @__PURE__ */ once(() => new SFNClient(clientConfig()));
export const cloudWatchLogsClient = /* @__PURE__ */ once(() => new CloudWatchLogsClient(clientConfig()));
export const codeBuildClient = /* @__PURE__ */ once(() => new CodeBuildClient(clientConfig()));
export const ecrClient = /* @__PURE__ */ once(() => new ECRClient(clientConfig()));
export const s3Client = /* @__PURE__ */ once(() => new S3Client(clientConfig()));
export const lambdaClient = /* @__PURE__ */ once(() => new LambdaClient(clientConfig()));
export const eventBridgeClient = /* @__PURE__ */ once(() => new EventBridgeClient(clientConfig()));
export const eksClient = /* @__PURE__ */ once(() => new EKSClient(clientConfig()));
