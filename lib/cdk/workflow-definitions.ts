import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteAccess } from '../../functions/manifest/routes.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import type { WorkflowName } from '../../functions/ports/workflows/port.js';
import type { Tables } from './access.js';
import { repoRoot } from './bundling.js';

/*
 * What the stack reads from the workflow definitions (functions/manifest/workflows.ts and the ASL files it
 * names): each step's Lambda timeout, how long an image build may take, what each step entry may touch.
 */

export const workflowNames = Object.keys(workflows) as WorkflowName[];
/** The longest a Lambda can run. */
export const lambdaMaxSeconds = 900;
/** A step's Lambda stops this long before its state's TimeoutSeconds, so a timed-out step is really over. */
export const stepTimeoutMarginSeconds = 10;
/**
 * The Lambda timeout of a callback task's step (`lambda:invoke.waitForTaskToken`). Such a Lambda only starts
 * the work (a build, a rollout) and returns; the runtime ends the task later through its token, so the
 * state's TimeoutSeconds (up to an hour, beyond Lambda's 15 minutes anyway) bounds the runtime, not the
 * Lambda. A minute covers a cold start, the DynamoDB transition, secret reads and the runtime API calls
 * that start the work, and a hung invocation fails the Task (into its Retry and Catch) within a minute
 * instead of holding it for the whole wait.
 */
export const callbackStepSeconds = 60;

/**
 * The Lambda timeout (seconds) of each step entry, across every Task state that runs it in any workflow:
 * the shortest bound of those states. A plain task (`"Resource": "${Placeholder}"`, or `lambda:invoke` with
 * the placeholder as `FunctionName`) runs for the whole state, so its Lambda stops
 * `stepTimeoutMarginSeconds` before the state's TimeoutSeconds. A callback task (`lambda:invoke.waitForTaskToken`)
 * only starts the work, so its Lambda gets `callbackStepSeconds` (still within the state's TimeoutSeconds).
 * Without a TimeoutSeconds, a plain task's Lambda gets Lambda's maximum less the margin.
 */
export function stepTimeouts(): Map<string, number> {
  const result = new Map<string, number>();
  forEachStepTask((target, task, stateTimeout) => {
    const bound = Math.min(
      lambdaMaxSeconds,
      (stateTimeout ?? lambdaMaxSeconds) - stepTimeoutMarginSeconds,
      target.callback ? callbackStepSeconds : lambdaMaxSeconds,
    );
    result.set(task.entry, Math.min(result.get(task.entry) ?? lambdaMaxSeconds, bound));
  });
  return result;
}

/**
 * How long the state machines wait for an image build: the shortest TimeoutSeconds of the callback tasks
 * whose step declares `imageBuilds`.
 */
export function imageBuildWaitSeconds(): number {
  let shortest = Number.POSITIVE_INFINITY;
  forEachStepTask((target, task, stateTimeout) => {
    if (target.callback && task.access.imageBuilds && stateTimeout !== undefined)
      shortest = Math.min(shortest, stateTimeout);
  });
  if (!Number.isFinite(shortest))
    throw new Error('no callback task with imageBuilds access has a TimeoutSeconds');
  return shortest;
}

/**
 * Every Task state of every workflow that runs a step through a `${Placeholder}` of its manifest entry:
 * how it runs it (`taskTarget`), the manifest's task, and the state's TimeoutSeconds if it has one.
 */
function forEachStepTask(
  visitTask: (
    target: { placeholder: string; callback: boolean },
    task: TaskDef,
    stateTimeout?: number,
  ) => void,
): void {
  const visit = (node: unknown, tasks: Record<string, TaskDef>): void => {
    if (Array.isArray(node)) for (const child of node) visit(child, tasks);
    if (!node || typeof node !== 'object') return;
    const target = taskTarget(node);
    const task = target ? tasks[target.placeholder] : undefined;
    const timeout = (node as { TimeoutSeconds?: unknown }).TimeoutSeconds;
    if (target && task) visitTask(target, task, typeof timeout === 'number' ? timeout : undefined);
    for (const child of Object.values(node)) visit(child, tasks);
  };
  for (const name of workflowNames) {
    const workflow = workflows[name];
    visit(JSON.parse(readFileSync(join(repoRoot, workflow.definition), 'utf8')), workflow.tasks);
  }
}

/**
 * The step a Task state runs, if it runs one through a `${Placeholder}`: either as its Resource, or as the
 * `FunctionName` of the Lambda service integration (`arn:aws:states:::lambda:invoke[.waitForTaskToken]`,
 * Parameters in JSONPath, Arguments in JSONata). `callback` when the state waits for a task token.
 */
export function taskTarget(state: object): { placeholder: string; callback: boolean } | undefined {
  const { Type, Resource, Parameters, Arguments } = state as Record<string, unknown>;
  if (Type !== undefined && Type !== 'Task') return undefined;
  if (typeof Resource !== 'string') return undefined;
  const direct = /^\$\{(\w+)\}$/.exec(Resource)?.[1];
  if (direct) return { placeholder: direct, callback: false };
  const integration = /^arn:[\w-]+:states:::lambda:invoke(\.waitForTaskToken)?$/.exec(Resource);
  if (!integration) return undefined;
  const args = (Parameters ?? Arguments) as { FunctionName?: unknown } | undefined;
  const name = typeof args?.FunctionName === 'string' ? args.FunctionName : undefined;
  const placeholder = name ? /^\$\{(\w+)\}$/.exec(name)?.[1] : undefined;
  return placeholder ? { placeholder, callback: integration[1] !== undefined } : undefined;
}

/** `${Name}` placeholders of an ASL document. */
export function placeholders(asl: string): string[] {
  return [...new Set([...asl.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1] as string))];
}

/**
 * Each step entry once, with the union of what every workflow declares for it (each table and mode at its
 * widest, every flag, every workflow it starts).
 */
export function stepAccessByEntry(): Map<string, RouteAccess> {
  const byEntry = new Map<string, RouteAccess>();
  for (const name of workflowNames) {
    for (const task of Object.values(workflows[name].tasks) as TaskDef[]) {
      const merged: RouteAccess = byEntry.get(task.entry) ?? { tables: {} };
      for (const [table, mode] of Object.entries(task.access.tables) as [keyof Tables, 'R' | 'RW'][]) {
        if (merged.tables[table] !== 'RW') merged.tables[table] = mode;
      }
      if (task.access.secrets && merged.secrets !== 'RW') merged.secrets = task.access.secrets;
      if (task.access.artifacts && merged.artifacts !== 'RW') merged.artifacts = task.access.artifacts;
      // Media modes combine: R and W make RW.
      if (task.access.media)
        merged.media = merged.media && merged.media !== task.access.media ? 'RW' : task.access.media;
      if (task.access.sourceHost) merged.sourceHost = true;
      if (task.access.imageBuilds) merged.imageBuilds = true;
      if (task.access.runtime) merged.runtime = true;
      if (task.access.invokesWatcher) merged.invokesWatcher = true;
      if (task.access.completesTasks) merged.completesTasks = true;
      if (task.access.publishes) merged.publishes = true;
      if (task.access.prStatus) merged.prStatus = true;
      if (task.access.gateLinks) merged.gateLinks = true;
      if (task.access.browser) merged.browser = true;
      const starts = (task.access as RouteAccess).starts ?? [];
      if (starts.length > 0) merged.starts = [...new Set([...(merged.starts ?? []), ...starts])];
      byEntry.set(task.entry, merged);
    }
  }
  return byEntry;
}
