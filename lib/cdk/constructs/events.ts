import { Duration, Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  type EventRuleDef,
  type EventRuleId,
  eventRules,
  type ScheduleDef,
  type ScheduleId,
  schedules,
} from '../../../functions/manifest/events.js';
import type { RouteAccess } from '../../../functions/manifest/routes.js';
import type { AccessResources } from '../access.js';
import { keepStackLevelIds } from '../logical-ids.js';
import { pascal } from '../stateful-stack.js';
import { entryFunction, type FunctionDefaults } from './entry-function.js';
import type { ImageBuildProject } from './image-build-project.js';
import {
  deliveredEvent,
  type FailureQueueSpec,
  fixDelivery,
  invocationRecord,
  type Operations,
  replay,
  supersededRun,
} from './operations.js';
import type { ServiceFunction } from './service-function.js';

/**
 * Delivery of a rule's events to its target (EventBridge's retry policy; what it still cannot deliver goes
 * to the rule's delivery DLQ). An hour, because the task an image-build event ends has timed out by then.
 */
export const eventDelivery = { retryAttempts: 24, maxEventAge: Duration.hours(1) };
/**
 * Lambda's own handling of an asynchronous invocation (EventBridge invokes targets asynchronously): a
 * function error is retried twice, then the event goes to the function's on-failure destination.
 */
export const eventInvocation = { retryAttempts: 2, maxEventAge: Duration.hours(1) };
/**
 * Delivery of a schedule's events to its target, and Lambda's handling of the asynchronous invocation:
 * each within one period of the schedule, after which the next run has superseded the missed one.
 */
export const scheduleRetries = { delivery: 24, invocation: 2 };
/** A scheduled target's Lambda timeout (it must end well within its schedule's period). */
export const scheduleTargetTimeout = Duration.minutes(5);

/** The period of a `rate(...)` schedule expression; undefined for a `cron(...)` one. */
export function ratePeriod(expression: string): Duration | undefined {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (!match) {
    if (/^cron\(.+\)$/.test(expression)) return undefined;
    throw new Error(`schedule "${expression}" is neither rate(...) nor cron(...)`);
  }
  const n = Number(match[1]);
  const unit = match[2]!;
  return unit.startsWith('minute')
    ? Duration.minutes(n)
    : unit.startsWith('hour')
      ? Duration.hours(n)
      : Duration.days(n);
}

/**
 * How long a scheduled event stays worth delivering or retrying: one period of its schedule (the next run
 * supersedes it), at least EventBridge's minimum (1 minute), at most an hour (for a cron schedule too).
 */
export function scheduleEventAge(def: ScheduleDef): Duration {
  const period = ratePeriod(def.schedule)?.toSeconds() ?? 3600;
  return Duration.seconds(Math.max(60, Math.min(period, 3600)));
}

/**
 * The service bus: owns the service's own event bus, named after the stack (`<stack name>-events`: one
 * per stage, never a fixed name). GitHub webhooks become events on it, and any system of the account may
 * put the documented custom events. Its resource policy lets only this account put events on it (no other
 * account, organization or service), which IAM narrows further: only the functions that publish may.
 */
export class ServiceBus extends Construct {
  /** The bus (outputs `EventBusName`, `EventBusArn`). */
  readonly eventBus: events.EventBus;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const stack = Stack.of(this);
    const name = `${stack.stackName}-events`;
    this.eventBus = new events.EventBus(this, 'ServiceEventBus', {
      eventBusName: name,
      description: 'Preview control plane: GitHub webhook events and the documented custom events',
    });
    // The bus's own Policy property rather than an AWS::Events::EventBusPolicy (CDK's addToResourcePolicy),
    // whose L1 reads a deprecated property; the ARN is built from the name, as the bus cannot name itself.
    const arn = stack.formatArn({ service: 'events', resource: 'event-bus', resourceName: name });
    const statement = new iam.PolicyStatement({
      sid: 'OwnAccountOnly',
      principals: [new iam.AccountRootPrincipal()],
      actions: ['events:PutEvents'],
      resources: [arn],
    });
    (this.eventBus.node.defaultChild as events.CfnEventBus).policy = {
      Version: '2012-10-17',
      Statement: [statement.toStatementJson()],
    };
    keepStackLevelIds(this.eventBus);
  }
}

/** An event rule (or a schedule) of the manifest, as built. */
export interface EventRuleResources {
  rule: events.Rule;
  function: ServiceFunction;
  /** The rule target's dead-letter queue: events EventBridge could not deliver to the function. */
  deliveryDlq: sqs.Queue;
  /** The function's on-failure destination: events it failed on after Lambda's retries. */
  failureDlq: sqs.Queue;
}

export interface EventRulesProps {
  /** What every target function is built with. */
  functions: FunctionDefaults;
  /** What a target's access may refer to (the state machines included). */
  resources: AccessResources;
  /** The bus of the rules whose manifest entry says `bus: 'service'`. */
  eventBus: events.IEventBus;
  /** The stack's image build: the rules with `ownImageBuildProject` match its project only. */
  imageBuild: ImageBuildProject;
  /** Makes the failure queues. */
  operations: Operations;
}

/** What a rule's target function is built with, beyond its manifest entry. */
interface TargetShape {
  tag: [string, string];
  description: string;
  timeout: Duration;
  delivery: { retryAttempts: number; maxEventAge: Duration };
  invocation: { retryAttempts: number; maxEventAge: Duration };
}

/**
 * Event rules and schedules: owns a rule per entry of functions/manifest/events.ts (`eventRules` on the
 * account's default bus, for AWS service events, or on the service bus; `schedules`, scheduled rules on the
 * default bus), each with its target function, granted from the entry's access, and two failure queues.
 * EventBridge invokes a Lambda asynchronously: the target's dead-letter queue gets the events EventBridge
 * could not deliver (after its retry policy: permissions, throttling, a deleted function), and the
 * function's on-failure destination gets the events the function itself failed on, after Lambda's two
 * retries. A function error never reaches the rule's DLQ.
 */
export class EventRules extends Construct {
  /** Per event rule: the rule, its target function and the queues its failures end in. */
  readonly rules = {} as Record<EventRuleId, EventRuleResources>;
  /** Per schedule: its scheduled rule, function and queues. */
  readonly schedules = {} as Record<ScheduleId, EventRuleResources>;

  constructor(scope: Construct, id: string, props: EventRulesProps) {
    super(scope, id);
    for (const ruleId of Object.keys(eventRules) as EventRuleId[]) {
      this.rules[ruleId] = this.eventRule(ruleId, eventRules[ruleId], props);
    }
    for (const scheduleId of Object.keys(schedules) as ScheduleId[]) {
      this.schedules[scheduleId] = this.schedule(scheduleId, schedules[scheduleId], props);
    }
  }

  /**
   * One event rule: on its bus, its manifest pattern (plus the stack's own image-build project when
   * `ownImageBuildProject`), and its target.
   */
  private eventRule(ruleId: EventRuleId, def: EventRuleDef, props: EventRulesProps): EventRuleResources {
    const detail = def.ownImageBuildProject
      ? { ...def.pattern.detail, 'project-name': [props.imageBuild.project.projectName] }
      : def.pattern.detail;
    const ruleProps: events.RuleProps = {
      description: def.description,
      eventBus: def.bus === 'service' ? props.eventBus : undefined,
      eventPattern: {
        source: [...def.pattern.source],
        detailType: [...def.pattern['detail-type']],
        ...(detail ? { detail } : {}),
      },
    };
    const shape: TargetShape = {
      tag: ['preview:event', ruleId],
      description: `Target of the ${ruleId} event rule`,
      timeout: Duration.seconds(60),
      delivery: eventDelivery,
      invocation: eventInvocation,
    };
    return this.ruleWithTarget(pascal(ruleId), def.target, ruleProps, shape, props, (fn) => ({
      delivery: {
        holds: `Events the ${ruleId} rule could not deliver to its function`,
        message: deliveredEvent,
        action: `${fixDelivery}, then ${replay(fn, 'message body')}.`,
      },
      failure: {
        holds: `Events the ${ruleId} function failed on, after Lambda's retries`,
        message: invocationRecord,
        action: `Fix the function (or what it calls), then ${replay(fn, 'its requestPayload')}.`,
      },
    }));
  }

  /**
   * One schedule: a scheduled EventBridge rule (on the default bus, where schedules live) rather than an
   * EventBridge Scheduler schedule. For one fixed rate the two deliver alike (asynchronously, with a
   * retry policy and a dead-letter queue), and the rule reuses the event rules' path: the invoke
   * permission is the function's resource policy scoped to the rule's ARN, with no extra execution role,
   * and the same two failure queues. Retries stop after one period of the schedule (the next run
   * supersedes a missed one), and the function must end within the period.
   */
  private schedule(scheduleId: ScheduleId, def: ScheduleDef, props: EventRulesProps): EventRuleResources {
    const age = scheduleEventAge(def);
    const period = ratePeriod(def.schedule);
    if (period && scheduleTargetTimeout.toSeconds() >= period.toSeconds())
      throw new Error(`schedule ${scheduleId}: ${def.schedule} is shorter than its function's timeout`);
    const ruleProps = { description: def.description, schedule: events.Schedule.expression(def.schedule) };
    const shape: TargetShape = {
      tag: ['preview:schedule', scheduleId],
      description: `Target of the ${scheduleId} schedule (${def.schedule})`,
      timeout: scheduleTargetTimeout,
      delivery: { retryAttempts: scheduleRetries.delivery, maxEventAge: age },
      invocation: { retryAttempts: scheduleRetries.invocation, maxEventAge: age },
    };
    return this.ruleWithTarget(pascal(scheduleId), def.target, ruleProps, shape, props, () => ({
      delivery: {
        holds: `Runs of the ${scheduleId} schedule that could not be delivered to its function`,
        message: deliveredEvent,
        action: `${supersededRun} ${fixDelivery}, then delete the message.`,
      },
      failure: {
        holds: `Runs of the ${scheduleId} schedule its function failed on, after Lambda's retries`,
        message: invocationRecord,
        action: `${supersededRun} Fix the function (or what it calls), then delete the message.`,
      },
    }));
  }

  /**
   * A rule, its target function (granted from `target.access`), the delivery DLQ and the failure DLQ (each
   * with its alarm: `queues` says what lands in each and what an operator does about it).
   */
  private ruleWithTarget(
    id: string,
    target: EventRuleDef['target'],
    ruleProps: events.RuleProps,
    shape: TargetShape,
    props: EventRulesProps,
    queues: (fn: ServiceFunction) => { delivery: FailureQueueSpec; failure: FailureQueueSpec },
  ): EventRuleResources {
    const access = target.access as RouteAccess;
    const fn = entryFunction(this, `${id}Target`, props.functions, {
      entry: target.entry,
      kind: 'event',
      access,
      description: shape.description,
      timeout: shape.timeout,
      tag: shape.tag,
    }).bindAccess(access, props.resources);
    const specs = queues(fn);
    const deliveryDlq = props.operations.failureQueue(this, `${id}DeliveryDlq`, specs.delivery);
    const failureDlq = props.operations.failureQueue(this, `${id}FailureDlq`, specs.failure);
    fn.configureAsyncInvoke({ ...shape.invocation, onFailure: new destinations.SqsDestination(failureDlq) });
    const rule = new events.Rule(this, `${id}Rule`, {
      ...ruleProps,
      targets: [new targets.LambdaFunction(fn, { ...shape.delivery, deadLetterQueue: deliveryDlq })],
    });
    return { rule, function: fn, deliveryDlq, failureDlq };
  }
}
