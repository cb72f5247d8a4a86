import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, type CfnElement, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { type EventRuleId, eventRules, type ScheduleId, schedules } from '../../functions/manifest/events.js';
import { type AuthKind, type RouteAccess, routeIds, routes } from '../../functions/manifest/routes.js';
import { type WorkerId, workers } from '../../functions/manifest/workers.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import { addPreviewStacks, type PreviewStacks } from '../../lib/cdk/app.js';
import type { ServiceFunction } from '../../lib/cdk/constructs/service-function.js';
import type { StatelessStack } from '../../lib/cdk/stateless-stack.js';

export const repoRoot = new URL('../..', import.meta.url).pathname;

export interface Synthesized extends PreviewStacks {
  app: App;
  statefulTemplate: Template;
  statelessTemplate: Template;
}

/**
 * An app with cdk.json's context (so the same feature flags as `cdk synth`), except that NodejsFunction
 * bundling is skipped for every stack: esbuilding ~33 functions belongs to `npm run synth`, not to every
 * test run.
 */
export function testApp(context: Record<string, unknown> = {}): App {
  const cdkJson = JSON.parse(readFileSync(join(repoRoot, 'cdk.json'), 'utf8')) as {
    context: Record<string, unknown>;
  };
  return new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [], ...context } });
}

/** The app as `cdk synth` builds it (see testApp), with both templates. */
export function synthesize(context: Record<string, unknown> = {}): Synthesized {
  const app = testApp(context);
  const stacks = addPreviewStacks(app);
  return {
    ...stacks,
    app,
    statefulTemplate: Template.fromStack(stacks.stateful),
    statelessTemplate: Template.fromStack(stacks.stateless),
  };
}

export type Json = any;

/**
 * The logical id of a construct's CloudFormation resource as the template has it: an override included
 * (lib/cdk/logical-ids.ts keeps stateful resources at their stack-level ids), which `stack.getLogicalId`
 * does not see.
 */
export const logicalIdOf = (construct: { node: { defaultChild?: unknown } }): string => {
  const element = construct.node.defaultChild as CfnElement;
  return Stack.of(element).resolve(element.logicalId) as string;
};

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

/**
 * Every Allow statement of a function's policies, one per resource: what the function may do to each
 * resource, whether or not `@aws-cdk/aws-iam:minimizePolicies` merged grants of the same actions.
 */
export function grantsOf(template: Template, functionLogicalId: string): Statement[] {
  return statementsOf(template, functionLogicalId).flatMap((s) =>
    s.resources.map((resource) => ({ actions: s.actions, resources: [resource] })),
  );
}

/** Whether a (token-laden) CloudFormation value mentions a logical id, whatever the reference form. */
export const mentions = (value: Json, logicalId: string): boolean =>
  JSON.stringify(value).includes(logicalId);

/**
 * The dependency cycles of a template (`a -> b -> a`), from DependsOn, Ref, Fn::GetAtt and Fn::Sub; none
 * for a template CloudFormation can deploy.
 */
export function cyclesOf(template: Template): string[] {
  const resources = template.toJSON().Resources as Record<string, Json>;
  const ids = new Set(Object.keys(resources));
  const dependencies = (value: Json, out: Set<string>): Set<string> => {
    if (Array.isArray(value)) for (const v of value) dependencies(v, out);
    else if (value && typeof value === 'object') {
      for (const [key, v] of Object.entries(value as Record<string, Json>)) {
        if (key === 'Ref' && typeof v === 'string' && ids.has(v)) out.add(v);
        else if (key === 'Fn::GetAtt') out.add(Array.isArray(v) ? v[0] : String(v).split('.')[0]);
        else if (key === 'Fn::Sub') {
          const text = Array.isArray(v) ? v[0] : v;
          for (const m of String(text).matchAll(/\$\{([\w]+)[.}]/g)) if (ids.has(m[1]!)) out.add(m[1]!);
          if (Array.isArray(v)) dependencies(v[1], out);
        } else dependencies(v, out);
      }
    }
    return out;
  };
  const graph = new Map(
    Object.entries(resources).map(([id, r]) => [
      id,
      [...dependencies(r.Properties ?? {}, new Set(asArray<string>(r.DependsOn)))],
    ]),
  );
  // Depth-first search for a back edge.
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles: string[] = [];
  const visit = (id: string, path: string[]): void => {
    if (state.get(id) === 'done') return;
    if (state.get(id) === 'visiting') {
      cycles.push([...path.slice(path.indexOf(id)), id].join(' -> '));
      return;
    }
    state.set(id, 'visiting');
    for (const dep of graph.get(id) ?? []) visit(dep, [...path, id]);
    state.set(id, 'done');
  };
  for (const id of graph.keys()) visit(id, []);
  return cycles;
}

/**
 * Context of a deployment with a cluster, every cluster setting given (test/infra/cluster.test.ts): the
 * Ingress path (the ALB's), so without protection and its default access chosen.
 */
export const clusterContext = {
  eksClusterName: 'previews',
  ingressDomain: 'previews.example.com',
  routing: 'ingress',
  protection: 'none',
  defaultAccess: 'public',
  ingressClassName: 'alb',
  ingressNamespace: 'kube-system',
  ingressAnnotations: JSON.stringify({
    'alb.ingress.kubernetes.io/scheme': 'internet-facing',
    'alb.ingress.kubernetes.io/group.name': 'previews',
  }),
  tlsSecretName: 'previews-wildcard',
  allowFromCidrs: '10.0.0.0/16, 10.1.0.0/16',
};

/** A cluster on Gateway routing with Envoy Gateway's protection, the verifier behind its internal load balancer. */
export const verifierNetworkContext = {
  eksClusterName: 'previews',
  ingressDomain: 'previews.example.com',
  gatewayName: 'previews',
  gatewayNamespace: 'envoy-gateway-system',
  verifierVpcId: 'vpc-0a1b2c3d4e5f60718',
  verifierSubnetIds: 'subnet-0aaa1111bbbb2222c, subnet-0ddd3333eeee4444f',
  clusterSecurityGroupId: 'sg-0123456789abcdef0',
};

/** A function of the stateless stack with what its manifest entry (or entries) declares. */
export interface DeclaredFunction {
  /** Its logical id in the stateless template. */
  id: string;
  fn: ServiceFunction;
  access: RouteAccess;
  /** Routes only: how callers authenticate. */
  auth?: AuthKind;
}

/**
 * What a step entry declares, across every workflow that runs it: each table at its widest mode, each
 * mode kind (secrets, artifacts, media) at its widest, each flag if any task sets it.
 */
export function stepAccess(entry: string): RouteAccess {
  const tasks = Object.values(workflows).flatMap((w) =>
    Object.values(w.tasks as Record<string, TaskDef>).filter((t) => t.entry === entry),
  );
  const widest = (modes: ('R' | 'RW' | undefined)[]) =>
    modes.includes('RW') ? 'RW' : modes.includes('R') ? 'R' : undefined;
  // Media also has `W` (write only): R and W together make RW.
  const widestMedia = (modes: ('R' | 'W' | 'RW' | undefined)[]) =>
    modes.includes('RW') || (modes.includes('R') && modes.includes('W'))
      ? 'RW'
      : (modes.find((m) => m !== undefined) as 'R' | 'W' | undefined);
  const access: RouteAccess = { tables: {} };
  for (const task of tasks) {
    for (const [table, mode] of Object.entries(task.access.tables) as [
      keyof RouteAccess['tables'],
      'R' | 'RW',
    ][])
      access.tables[table] = widest([access.tables[table], mode]);
  }
  const accessOf = (t: TaskDef) => t.access as RouteAccess;
  for (const kind of ['secrets', 'artifacts'] as const) {
    const mode = widest(tasks.map((t) => accessOf(t)[kind]));
    if (mode) access[kind] = mode;
  }
  const media = widestMedia(tasks.map((t) => accessOf(t).media));
  if (media) access.media = media;
  for (const flag of [
    'sourceHost',
    'imageBuilds',
    'runtime',
    'invokesWatcher',
    'completesTasks',
    'publishes',
    'prStatus',
    'gateLinks',
    'browser',
  ] as const) {
    if (tasks.some((t) => accessOf(t)[flag])) access[flag] = true;
  }
  const starts = [...new Set(tasks.flatMap((t) => accessOf(t).starts ?? []))];
  if (starts.length > 0) access.starts = starts;
  return access;
}

/** Every function of the stateless stack (routes, steps, event targets, schedule targets, workers). */
export function declaredFunctions(stateless: StatelessStack): [string, DeclaredFunction][] {
  const id = (fn: ServiceFunction) => logicalIdOf(fn);
  const entry = (fn: ServiceFunction, access: RouteAccess, auth?: AuthKind): DeclaredFunction => ({
    id: id(fn),
    fn,
    access,
    ...(auth ? { auth } : {}),
  });
  return [
    ...routeIds.map((r): [string, DeclaredFunction] => [
      `route ${r}`,
      entry(stateless.routeFunctions[r], routes[r].access as RouteAccess, routes[r].auth),
    ]),
    ...[...stateless.stepFunctions].map(([e, fn]): [string, DeclaredFunction] => [
      `step ${e}`,
      entry(fn, stepAccess(e)),
    ]),
    ...(Object.keys(eventRules) as EventRuleId[]).map((r): [string, DeclaredFunction] => [
      `event target ${r}`,
      entry(stateless.eventRules[r].function, eventRules[r].target.access as RouteAccess),
    ]),
    ...(Object.keys(schedules) as ScheduleId[]).map((r): [string, DeclaredFunction] => [
      `schedule target ${r}`,
      entry(stateless.schedules[r].function, schedules[r].target.access as RouteAccess),
    ]),
    ...(Object.keys(workers) as WorkerId[]).map((w): [string, DeclaredFunction] => [
      `worker ${w}`,
      entry(stateless.workers[w].function, workers[w].access as RouteAccess),
    ]),
  ];
}
