import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { addPreviewStacks, type PreviewStacks } from '../../lib/cdk/app.js';

export const repoRoot = new URL('../..', import.meta.url).pathname;

export interface Synthesized extends PreviewStacks {
  statefulTemplate: Template;
  statelessTemplate: Template;
}

/**
 * The app as `cdk synth` builds it (same cdk.json context, so the same feature flags), except that
 * NodejsFunction bundling is skipped for every stack: esbuilding ~21 functions belongs to `npm run synth`,
 * not to every test run.
 */
export function synthesize(context: Record<string, unknown> = {}): Synthesized {
  const cdkJson = JSON.parse(readFileSync(join(repoRoot, 'cdk.json'), 'utf8')) as {
    context: Record<string, unknown>;
  };
  const app = new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [], ...context } });
  const stacks = addPreviewStacks(app);
  return {
    ...stacks,
    statefulTemplate: Template.fromStack(stacks.stateful),
    statelessTemplate: Template.fromStack(stacks.stateless),
  };
}

export type Json = any;

/** The resources of a type, by logical id. */
export const resourcesOf = (template: Template, type: string): Record<string, Json> =>
  template.findResources(type) as Record<string, Json>;

export const asArray = <T>(value: T | T[] | undefined): T[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

export interface Statement {
  actions: string[];
  resources: Json[];
}

/** Every Allow statement of the policies attached to a function's role. */
export function statementsOf(template: Template, functionLogicalId: string): Statement[] {
  const fn = template.toJSON().Resources[functionLogicalId];
  const roleId: string = fn.Properties.Role['Fn::GetAtt'][0];
  const policies = Object.values(resourcesOf(template, 'AWS::IAM::Policy')).filter((p) =>
    asArray(p.Properties.Roles).some((r: Json) => r.Ref === roleId),
  );
  return policies.flatMap((p) =>
    asArray<Json>(p.Properties.PolicyDocument.Statement)
      .filter((s) => s.Effect === 'Allow')
      .map((s) => ({ actions: asArray<string>(s.Action), resources: asArray(s.Resource) })),
  );
}

/** Whether a (token-laden) CloudFormation value mentions a logical id, whatever the reference form. */
export const mentions = (value: Json, logicalId: string): boolean =>
  JSON.stringify(value).includes(logicalId);
