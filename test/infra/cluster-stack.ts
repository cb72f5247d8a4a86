import { expect } from '@jest/globals';
import { type EventRuleId, eventRules, type ScheduleId, schedules } from '../../functions/manifest/events.js';
import { type RouteAccess, routeIds, routes } from '../../functions/manifest/routes.js';
import { type WorkerId, workers } from '../../functions/manifest/workers.js';
import { workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import { clusterRouteIds, clusterStepEntries } from '../../lib/cdk/cluster.js';
import {
  clusterContext,
  type Json,
  logicalIdOf,
  resourcesOf,
  type Synthesized,
  statementsOf,
  stepAccess,
  synthesize,
} from './synth.js';

/*
 * What the cluster's infra tests (cluster.test.ts, cluster-watcher.test.ts) share: the stacks they
 * synthesize, each on first use and once per file, and the reading of them: every function with its
 * runtime flags, its environment, role and EKS grants, the watcher and the cluster API's custom resource.
 */

export const gateway = { gatewayName: 'previews', gatewayNamespace: 'envoy-gateway-system' };
const synthesized = new Map<string, Synthesized>();
const once = (name: string, context?: Record<string, unknown>): Synthesized => {
  if (!synthesized.has(name)) synthesized.set(name, synthesize(context));
  return synthesized.get(name)!;
};
/**
 * The stack without a cluster (the default), with every cluster setting, with only the required ones, and
 * with the roles mapped in aws-auth rather than by access entries.
 */
export const stacks = {
  get none() {
    return once('none');
  },
  get full() {
    return once('full', clusterContext);
  },
  get minimal() {
    return once('minimal', { eksClusterName: 'previews', ingressDomain: 'previews.example.com', ...gateway });
  },
  get awsAuth() {
    return once('awsAuth', {
      eksClusterName: 'previews',
      ingressDomain: 'previews.example.com',
      eksAccessEntries: 'false',
      ...gateway,
    });
  },
};

export const workflowNames = Object.keys(workflows) as WorkflowName[];
export const workerIds = Object.keys(workers) as WorkerId[];
export const functionsOf = (s: Synthesized) => resourcesOf(s.statelessTemplate, 'AWS::Lambda::Function');
export const envOf = (s: Synthesized, id: string): Record<string, Json> =>
  functionsOf(s)[id].Properties.Environment.Variables;
export const roleOf = (s: Synthesized, id: string): string =>
  functionsOf(s)[id].Properties.Role['Fn::GetAtt'][0];

/**
 * Every function of a stack: which of the runtime flags its manifest entry declares (a step entry: any
 * workflow's; `runtime` the cluster's settings, `invokesWatcher` the watcher, `completesTasks` SendTask*),
 * and whether it calls the cluster.
 */
export interface Built {
  id: string;
  runtime: boolean;
  invokesWatcher: boolean;
  completesTasks: boolean;
  callsCluster: boolean;
  isWatcher: boolean;
}
export const flagsOf = (access: RouteAccess) => ({
  runtime: Boolean(access.runtime),
  invokesWatcher: Boolean(access.invokesWatcher),
  completesTasks: Boolean(access.completesTasks),
});
export function built(s: Synthesized): [string, Built][] {
  return [
    ...routeIds.map((r): [string, Built] => [
      `route ${r}`,
      {
        id: logicalIdOf(s.stateless.routeFunctions[r]),
        ...flagsOf(routes[r].access as RouteAccess),
        callsCluster: clusterRouteIds.includes(r),
        isWatcher: false,
      },
    ]),
    ...[...s.stateless.stepFunctions].map(([entry, fn]): [string, Built] => [
      `step ${entry}`,
      {
        id: logicalIdOf(fn),
        ...flagsOf(stepAccess(entry)),
        callsCluster: clusterStepEntries.includes(entry),
        isWatcher: false,
      },
    ]),
    ...(Object.keys(eventRules) as EventRuleId[]).map((r): [string, Built] => [
      `event target ${r}`,
      {
        id: logicalIdOf(s.stateless.eventRules[r].function),
        ...flagsOf(eventRules[r].target.access as RouteAccess),
        callsCluster: false,
        isWatcher: false,
      },
    ]),
    ...(Object.keys(schedules) as ScheduleId[]).map((id): [string, Built] => [
      `schedule target ${id}`,
      {
        id: logicalIdOf(s.stateless.schedules[id].function),
        ...flagsOf(schedules[id].target.access as RouteAccess),
        callsCluster: Boolean((schedules[id].target.access as RouteAccess).runtime),
        isWatcher: false,
      },
    ]),
    ...workerIds.map((w): [string, Built] => [
      `worker ${w}`,
      {
        id: logicalIdOf(s.stateless.workers[w].function),
        ...flagsOf(workers[w].access as RouteAccess),
        callsCluster: true,
        isWatcher: w === 'rolloutWatcher',
      },
    ]),
  ];
}

export const watcherId = (s: Synthesized) => logicalIdOf(s.stateless.workers.rolloutWatcher.function);
/** The logical id of the custom resource that describes the cluster (its one `Custom::AWS`). */
export const clusterApiId = (s: Synthesized) => {
  const ids = Object.keys(resourcesOf(s.statelessTemplate, 'Custom::AWS'));
  expect(ids).toHaveLength(1);
  return ids[0]!;
};
export const clusterArn = {
  'Fn::Join': [
    '',
    [
      'arn:',
      { Ref: 'AWS::Partition' },
      ':eks:',
      { Ref: 'AWS::Region' },
      ':',
      { Ref: 'AWS::AccountId' },
      ':cluster/previews',
    ],
  ],
};
export const eksVars = [
  'EKS_CLUSTER_NAME',
  'EKS_ROUTING',
  'EKS_GATEWAY_NAME',
  'EKS_GATEWAY_NAMESPACE',
  'EKS_GATEWAY_SECTION',
  'EKS_PROTECTION',
  'PREVIEW_DEFAULT_ACCESS',
  'EKS_INGRESS_CLASS',
  'EKS_INGRESS_DOMAIN',
  'EKS_INGRESS_NAMESPACE',
  'EKS_INGRESS_ANNOTATIONS',
  'EKS_TLS_SECRET_NAME',
  'EKS_ALLOW_FROM_CIDRS',
];
export const eksEnvOf = (s: Synthesized, id: string) =>
  Object.fromEntries(Object.entries(envOf(s, id)).filter(([k]) => eksVars.includes(k)));

export function eksStatementsOf(s: Synthesized, id: string) {
  return statementsOf(s.statelessTemplate, id).filter((st) => st.actions.some((a) => a.startsWith('eks:')));
}
