import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { StateMachine } from 'aws-local-stepfunctions';
import { newId } from '../../shared/crypto.js';
import { log } from '../../shared/log.js';
import type { WorkflowName, Workflows } from '../../shared/ports.js';
import { localTaskArn, substitute, type WorkflowDef, workflows } from '../../workflows.js';
import { lambdaContext } from './lambda-context.js';

type StepHandler = (input: unknown, context: unknown) => Promise<unknown>;
type JsonValue = Parameters<StateMachine['run']>[0];
interface Loaded {
  machine: StateMachine;
  handlers: Record<string, (input: JsonValue) => Promise<JsonValue>>;
}

/** Walk an ASL document (including Parallel branches and Map processors) and yield every Task state. */
function* taskStates(states: Record<string, Record<string, unknown>>): Generator<[string, string]> {
  for (const [name, state] of Object.entries(states)) {
    if (state.Type === 'Task') yield [name, String(state.Resource)];
    for (const branch of (state.Branches as { States: never }[] | undefined) ?? [])
      yield* taskStates(branch.States);
    const inner = (state.ItemProcessor ?? state.Iterator) as { States: never } | undefined;
    if (inner) yield* taskStates(inner.States);
  }
}

/**
 * Local workflow adapter: runs the very ASL files Step Functions runs, in-process, with
 * aws-local-stepfunctions. Each Task state's Lambda is the same step handler module CDK deploys.
 * Executions are fire-and-forget like StartExecution; `idle()` and `stop()` serve tests and shutdown.
 */
export class LocalWorkflows implements Workflows {
  private readonly loaded = new Map<WorkflowName, Promise<Loaded>>();
  private readonly running = new Map<string, { abort: () => void; done: Promise<unknown> }>();

  constructor(private readonly repoRoot: string) {}

  private async load(name: WorkflowName): Promise<Loaded> {
    const def: WorkflowDef = workflows[name];
    const arns = Object.fromEntries(Object.keys(def.tasks).map((p) => [p, localTaskArn(p)]));
    const asl = JSON.parse(substitute(readFileSync(join(this.repoRoot, def.definition), 'utf8'), arns));
    const byArn = new Map<string, StepHandler>();
    for (const [placeholder, task] of Object.entries(def.tasks)) {
      const mod = (await import(pathToFileURL(join(this.repoRoot, task.entry)).href)) as {
        handler: StepHandler;
      };
      byArn.set(arns[placeholder]!, mod.handler);
    }
    const handlers: Loaded['handlers'] = {};
    for (const [stateName, resource] of taskStates(asl.States)) {
      const fn = byArn.get(resource);
      if (!fn) throw new Error(`${def.definition}: state ${stateName} has no local handler for ${resource}`);
      handlers[stateName] = async (input) =>
        (await fn(input, lambdaContext(stateName, newId(), 15 * 60_000))) as JsonValue;
    }
    return { machine: new StateMachine(asl), handlers };
  }

  async start(workflow: WorkflowName, input: Record<string, unknown>, name: string) {
    if (!this.loaded.has(workflow)) this.loaded.set(workflow, this.load(workflow));
    const { machine, handlers } = await this.loaded.get(workflow)!;
    const executionId = `local:${workflow}:${name}`;
    const execution = machine.run(input as JsonValue, {
      overrides: { taskResourceLocalHandlers: handlers },
      noThrowOnAbort: true,
      context: {
        Execution: {
          Id: executionId,
          Name: name,
          Input: input as JsonValue,
          StartTime: new Date().toISOString(),
        },
      },
    });
    const done = execution.result.then(
      () => undefined,
      (err: Error) => log.warn('workflow execution failed', { workflow, executionId, error: err.name }),
    );
    this.running.set(executionId, { abort: execution.abort, done });
    void done.finally(() => this.running.delete(executionId));
    return { executionId };
  }

  /** Resolves once no execution is running (executions started meanwhile are awaited too). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /** Abort every running execution and wait for them to settle. */
  async stop(): Promise<void> {
    for (const r of this.running.values()) r.abort();
    await this.idle();
  }
}
