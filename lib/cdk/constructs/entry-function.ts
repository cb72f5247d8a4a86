import { type Duration, Tags } from 'aws-cdk-lib';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import type { RouteAccess } from '../../../functions/manifest/routes.js';
import type { FunctionKind, Tables } from '../access.js';
import { ServiceFunction, type ServiceFunctionProps } from './service-function.js';

/** What every function of the service is built with, whichever construct builds it. */
export interface FunctionDefaults {
  /** Every table of the stateful stack: each name becomes its `TABLE_*` variable. */
  tables: Tables;
  /** Where secret bundles live (SECRET_NAME_PREFIX). */
  secretNamePrefix: string;
  /** Retention of each function's log group. */
  logRetention: logs.RetentionDays;
  /** The extra props a manifest entry's access implies (the browser's: `TestRuns.functionShape`). */
  shape: (access: RouteAccess) => Partial<ServiceFunctionProps>;
}

/** One function of a manifest entry (a route, a page, a step, an event or schedule target, a worker). */
export interface EntryFunctionProps {
  /** Handler module, relative to the repository root. */
  entry: string;
  /** What invokes it: API Gateway, a state machine, EventBridge, or the service itself (a worker). */
  kind: FunctionKind;
  /** What the entry declares; it shapes the function (the browser's), granting is the caller's. */
  access: RouteAccess;
  description: string;
  /** @default - ServiceFunction's: 28 seconds for `api`, 15 minutes otherwise */
  timeout?: Duration;
  /** The tag naming the entry (`preview:route` and the route id, …). */
  tag: [string, string];
  /** Folders copied beside the bundle (a page's `files`). */
  files?: readonly string[];
}

/** A ServiceFunction of `scope` built with the defaults, tagged with its manifest entry. */
export function entryFunction(
  scope: Construct,
  id: string,
  defaults: FunctionDefaults,
  props: EntryFunctionProps,
): ServiceFunction {
  const fn = new ServiceFunction(scope, id, {
    ...defaults.shape(props.access),
    entry: props.entry,
    kind: props.kind,
    tables: defaults.tables,
    secretNamePrefix: defaults.secretNamePrefix,
    logRetention: defaults.logRetention,
    description: props.description,
    timeout: props.timeout,
    ...(props.files?.length ? { copiedFiles: props.files } : {}),
  });
  Tags.of(fn).add(...props.tag);
  return fn;
}
