import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Template } from 'aws-cdk-lib/assertions';
import { clusterContext, repoRoot, synthesize } from './synth.js';

/**
 * The resource types that hold state in a customer's account (data, messages, logs, keys, subscriptions,
 * images, an operator's secret): a change of their logical id makes CloudFormation replace them, losing
 * what they hold (or failing, for one with a fixed name). test/infra/logical-ids.test.ts holds every such
 * resource of both stacks to the logical id recorded in the fixture.
 */
export const statefulTypes = [
  'AWS::DynamoDB::Table',
  'AWS::ECR::Repository',
  'AWS::Events::EventBus',
  'AWS::KMS::Key',
  'AWS::Logs::LogGroup',
  'AWS::S3::Bucket',
  'AWS::SNS::Topic',
  'AWS::SQS::Queue',
  'AWS::SecretsManager::Secret',
] as const;

/**
 * What must move with them, or not at all:
 * - the policies of a kept bucket, queue or topic: a moved policy is a new resource on the same target,
 *   and deleting the old one afterwards (CloudFormation's cleanup) would strip the target's policy;
 * - the REST API and everything under it (the deployment aside, which is new at every change anyway):
 *   its id is the API's URL, which clients and the GitHub App's webhook hold, and a moved stage, resource,
 *   method or gateway response would collide with the one already there.
 */
export const attachedTypes = [
  'AWS::S3::BucketPolicy',
  'AWS::SQS::QueuePolicy',
  'AWS::SNS::TopicPolicy',
  'AWS::ApiGateway::Account',
  'AWS::ApiGateway::GatewayResponse',
  'AWS::ApiGateway::Method',
  'AWS::ApiGateway::Resource',
  'AWS::ApiGateway::RestApi',
  'AWS::ApiGateway::Stage',
] as const;

/** Every type whose logical ids the fixture records. */
export const keptTypes: readonly string[] = [...statefulTypes, ...attachedTypes];

/**
 * The contexts whose templates differ in stateful resources: without a cluster (the default) and with one
 * (every cluster setting). The other context settings (githubAppSecretArn, the ffmpeg layer, the API
 * Gateway role, the image-build architecture) add no stateful resource.
 */
export const statefulVariants: Record<string, Record<string, unknown>> = {
  default: {},
  cluster: clusterContext,
};

export const fixturePath = join(repoRoot, 'test/infra/fixtures/stateful-logical-ids.json');

/** `type logicalId` of every stateful resource of a template, sorted. */
export function statefulIdsOf(template: Template): string[] {
  const resources = template.toJSON().Resources as Record<string, { Type: string }>;
  return Object.entries(resources)
    .filter(([, r]) => keptTypes.includes(r.Type))
    .map(([id, r]) => `${r.Type} ${id}`)
    .sort();
}

/** The names of a template's outputs, sorted: what operators and scripts read after a deploy. */
export function outputsOf(template: Template): string[] {
  return Object.keys(template.toJSON().Outputs ?? {}).sort();
}

/** What an upgrade must keep, per variant: each stack's stateful resources and the stateless outputs. */
export interface KeptIds {
  stateful: string[];
  stateless: string[];
  statelessOutputs: string[];
}

/** Per variant: each stack's stateful resources (`type logicalId`) and the stateless stack's outputs. */
export function statefulLogicalIds(): Record<string, KeptIds> {
  return Object.fromEntries(
    Object.entries(statefulVariants).map(([name, context]) => {
      const { statefulTemplate, statelessTemplate } = synthesize(context);
      const kept: KeptIds = {
        stateful: statefulIdsOf(statefulTemplate),
        stateless: statefulIdsOf(statelessTemplate),
        statelessOutputs: outputsOf(statelessTemplate),
      };
      return [name, kept];
    }),
  );
}

// `npx tsx test/infra/stateful-ids.ts` records today's ids (only when a change means to replace one).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(fixturePath, `${JSON.stringify(statefulLogicalIds(), null, 2)}\n`);
  console.log(`wrote ${fixturePath}`);
}
