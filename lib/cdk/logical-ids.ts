import { CfnElement, Names } from 'aws-cdk-lib';
import { Construct, type IConstruct } from 'constructs';

/**
 * Keep the logical ids `construct` and everything under it had when `from` (the construct itself, or an
 * ancestor) sat directly under the stack. For what holds state in a customer's account (buckets, secrets,
 * the event bus, queues, log groups, the alarm topic and its key) and what a moved copy would collide with
 * (the REST API's stage, resources, methods; a kept target's policies): moving them into a construct of
 * their concern must not make an upgrade replace them. The ids are CDK's own (`Names.uniqueId` of the same
 * path under a bare root is what a stack allocates for that path); an element that names itself (an API
 * deployment, whose id hashes its content) is left alone. Call it once the subtree is complete.
 * test/infra/logical-ids.test.ts holds every such id to today's templates.
 */
export function keepStackLevelIds(construct: IConstruct, from: IConstruct = construct): void {
  for (const element of construct.node.findAll()) {
    if (!(element instanceof CfnElement) || selfNamed(element)) continue;
    const scopes = element.node.scopes;
    const start = scopes.indexOf(from);
    if (start < 0) throw new Error(`${element.node.path} is not under ${from.node.path}`);
    let node = new Construct(undefined as never, '');
    for (const scope of scopes.slice(start)) node = new Construct(node, scope.node.id);
    element.overrideLogicalId(Names.uniqueId(node));
  }
}

/** An element whose logical id is already an override of its own (API Gateway's latest deployment). */
const selfNamed = (element: CfnElement): boolean =>
  (element as unknown as { _logicalIdOverride?: unknown })._logicalIdOverride !== undefined;
