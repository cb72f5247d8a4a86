import { Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/**
 * cdk-nag acknowledgments (cdk-nag 3: CDK's `Validations.of(scope).acknowledge`, the successor of v2's
 * `NagSuppressions`). An acknowledgment covers the construct and everything under it, so each one is made
 * on the narrowest construct that carries the finding. A rule that reports several findings per resource
 * (IAM4 per managed policy, IAM5 per wildcard) is acknowledged finding by finding
 * (`AwsSolutions-IAM5[Resource::…]`, v2's `appliesTo`), never as a whole. The infra tests
 * (test/infra/nag.test.ts) run `AwsSolutionsChecks` over the app, fail on any unacknowledged finding, and
 * fail on an acknowledgment that no longer matches a finding or gives no reason.
 */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

/**
 * Acknowledge the IAM5 finding of one wildcard resource, given as the same expression the grant used
 * (`bucket.arnForObjects('sources/*')`, `` `${fn.functionArn}:*` ``). The resource must belong to the
 * scope's own stack: a cross-stack reference only takes its final form (`Fn::GetStackOutput`) when the app
 * is prepared, after this runs.
 */
export function acknowledgeWildcardResource(scope: IConstruct, resource: string, reason: string): void {
  const flat = flattenReference(Stack.of(scope).resolve(resource));
  acknowledge(scope, `AwsSolutions-IAM5[Resource::${flat}]`, reason);
}

/**
 * A resolved CloudFormation value as cdk-nag names it in a finding: `Fn::Join` joined, `Fn::GetAtt` as
 * `<Id.Attr>`, `Ref` as `<Id>`, `${…}` of `Fn::Sub` as `<…>`, anything else as JSON.
 */
export function flattenReference(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value.replace(/\$\{/g, '<').replace(/\}/g, '>');
  const node = value as Record<string, unknown>;
  if (node['Fn::Join']) {
    const [delimiter, items] = node['Fn::Join'] as [string, unknown[]];
    return items.map(flattenReference).join(delimiter);
  }
  if (node['Fn::Sub']) return flattenReference(node['Fn::Sub']);
  if (node['Fn::GetAtt']) {
    const [id, attribute] = node['Fn::GetAtt'] as [unknown, unknown];
    return `<${flattenReference(id)}.${flattenReference(attribute)}>`;
  }
  if (node['Fn::ImportValue']) return flattenReference(node['Fn::ImportValue']);
  if (node.Ref) return `<${flattenReference(node.Ref)}>`;
  return JSON.stringify(value);
}
