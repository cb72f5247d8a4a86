/**
 * The event manifest: each EventBridge rule the service owns and the Lambda it invokes. Read by the CDK
 * stateless stack (a rule, its target with a DLQ and a retry policy, and the function with an on-failure
 * destination, since EventBridge invokes a Lambda asynchronously) and, for rules on the service's own bus,
 * by the local in-process bus. Plain data, like the route manifest.
 */
import type { RouteAccess } from './routes.js';

export interface EventTargetDef {
  /** Handler module, relative to the repository root; it exports `handler` (an EventBridge event). */
  entry: string;
  access: Omit<RouteAccess, 'starts'> & Pick<RouteAccess, 'starts'>;
}

export interface EventRuleDef {
  description: string;
  /** `default`: the account's default bus (AWS service events). */
  bus: 'default';
  /** The rule's event pattern, less what CDK adds from the stack (`detail.project-name` below). */
  pattern: { source: string[]; 'detail-type': string[]; detail?: Record<string, unknown> };
  /** Match only the stack's own image-build project (CDK adds `detail.project-name`). */
  ownImageBuildProject?: true;
  target: EventTargetDef;
}

/** CodeBuild's terminal build states (a build in any other state is still running). */
export const TERMINAL_BUILD_STATES = ['SUCCEEDED', 'FAILED', 'FAULT', 'STOPPED', 'TIMED_OUT'] as const;

export const eventRules = {
  imageBuildFinished: {
    description: 'An image build reached a terminal state: end the BuildImages task waiting on it',
    bus: 'default',
    pattern: {
      source: ['aws.codebuild'],
      'detail-type': ['CodeBuild Build State Change'],
      detail: { 'build-status': [...TERMINAL_BUILD_STATES] },
    },
    ownImageBuildProject: true,
    target: {
      entry: 'functions/events/image-build-finished.ts',
      access: { tables: { builds: 'RW' }, imageBuilds: true, runtime: true },
    },
  },
} as const satisfies Record<string, EventRuleDef>;

export type EventRuleId = keyof typeof eventRules;
