import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { StateMachine } from 'aws-local-stepfunctions';
import { localTaskArn, substitute, type WorkflowDef, workflows } from '../../manifest/workflows.js';
import { lambdaContext } from '../../shared/aws/lambda-context.js';
import { newId } from '../../shared/crypto.js';
import { log } from '../../shared/log.js';
import type { TaskOutcome, WorkflowName, Workflows } from './port.js';

type StepHandler = (input: unknown, context: unknown) => Promise<unknown>;
type JsonValue = Parameters<StateMachine['run']>[0];
interface Loaded {
  asl: ConstructorParameters<typeof StateMachine>[0];
  /** Built at load when the definition had to be validated, else on first use (`machineOf`). */
  machine?: StateMachine;
  handlers: Record<string, (input: JsonValue) => Promise<JsonValue>>;
}

/**
 * ASL texts that asl-validator already passed (lib/local keeps them on disk, keyed by a digest of the text
 * and the validator's version), so a start validates only definitions it has not seen: each validation
 * builds and compiles asl-validator's JSON schemas anew (~0.2 s). Without one, every load validates.
 */
export interface AslValidationCache {
  has(asl: string): boolean;
  add(asl: string): void;
}

/**
 * aws-local-stepfunctions (with asl-validator, ajv and jsonata: ~0.2 s to load) is imported on first need,
 * so a start whose definitions are all known valid does not wait for it (`warm` loads it afterwards).
 */
let library: Promise<typeof import('aws-local-stepfunctions')> | undefined;
const stepFunctions = () => {
  library ??= import('aws-local-stepfunctions');
  return library;
};

/** The service integration that invokes a Lambda and then waits for a callback with the task token. */
export const CALLBACK_RESOURCE = 'arn:aws:states:::lambda:invoke.waitForTaskToken';

interface TaskState {
  name: string;
  /** The Lambda the state invokes (its Resource, or `Parameters.FunctionName` for a callback task). */
  functionArn: string;
  callback: boolean;
  /** The state's TimeoutSeconds (60 when absent: aws-local-stepfunctions' default). */
  timeoutSeconds: number;
  /** The state's HeartbeatSeconds, if any: a callback task without a heartbeat for that long fails. */
  heartbeatSeconds?: number;
}

/** Walk an ASL document (including Parallel branches and Map processors) and yield every Task state. */
function* taskStates(states: Record<string, Record<string, unknown>>): Generator<TaskState> {
  for (const [name, state] of Object.entries(states)) {
    if (state.Type === 'Task') {
      const callback = state.Resource === CALLBACK_RESOURCE;
      const params = state.Parameters as { FunctionName?: string } | undefined;
      yield {
        name,
        functionArn: String(callback ? params?.FunctionName : state.Resource),
        callback,
        timeoutSeconds: typeof state.TimeoutSeconds === 'number' ? state.TimeoutSeconds : 60,
        heartbeatSeconds: typeof state.HeartbeatSeconds === 'number' ? state.HeartbeatSeconds : undefined,
      };
    }
    for (const branch of (state.Branches as { States: never }[] | undefined) ?? [])
      yield* taskStates(branch.States);
    const inner = (state.ItemProcessor ?? state.Iterator) as { States: never } | undefined;
    if (inner) yield* taskStates(inner.States);
  }
}

/** What a finished local execution looked like (tests and `bench:pipeline` read it). */
export interface ExecutionRecord {
  executionId: string;
  workflow: WorkflowName;
  input: Record<string, unknown>;
  status: 'running' | 'succeeded' | 'failed' | 'aborted';
  /** State transitions, the unit Step Functions bills: states entered, plus retries. */
  transitions: number;
  startedAt: number;
  endedAt?: number;
}

/**
 * Local workflow adapter: runs the very ASL files Step Functions runs, in-process, with
 * aws-local-stepfunctions. Each Task state's Lambda is the same step handler module CDK deploys.
 * Executions are fire-and-forget like StartExecution; `idle()` and `stop()` serve tests and shutdown.
 *
 * Callback tasks (`lambda:invoke.waitForTaskToken`), which aws-local-stepfunctions does not implement,
 * are run the way Step Functions runs them: invoke the step with the Payload and a fresh task token in
 * place of `$$.Task.Token`, then wait until `completeTask(token, …)` ends the task (or its TimeoutSeconds
 * does). The Lambda's own return value is ignored, its failure fails the task.
 */
export class LocalWorkflows implements Workflows {
  private readonly loaded = new Map<WorkflowName, Promise<Loaded>>();
  private readonly running = new Map<string, { abort: () => void; done: Promise<unknown> }>();
  private readonly waiting = new Map<
    string,
    { resolve: (v: JsonValue) => void; reject: (e: Error) => void; heartbeat: () => void }
  >();
  /** Executions by id, newest last (bounded). */
  readonly executions = new Map<string, ExecutionRecord>();

  constructor(
    private readonly repoRoot: string,
    private readonly validated?: AslValidationCache,
  ) {}

  private async load(name: WorkflowName): Promise<Loaded> {
    const def: WorkflowDef = workflows[name];
    const arns = Object.fromEntries(Object.keys(def.tasks).map((p) => [p, localTaskArn(p)]));
    const text = substitute(readFileSync(join(this.repoRoot, def.definition), 'utf8'), arns);
    const asl = JSON.parse(text);
    const known = this.validated?.has(text) ?? false;
    const byArn = new Map<string, StepHandler>();
    for (const [placeholder, task] of Object.entries(def.tasks)) {
      const mod = (await import(pathToFileURL(join(this.repoRoot, task.entry)).href)) as {
        handler: StepHandler;
      };
      byArn.set(arns[placeholder]!, mod.handler);
    }
    const handlers: Loaded['handlers'] = {};
    for (const { name: stateName, functionArn, callback, timeoutSeconds, heartbeatSeconds } of taskStates(
      asl.States,
    )) {
      const fn = byArn.get(functionArn);
      if (!fn)
        throw new Error(`${def.definition}: state ${stateName} has no local handler for ${functionArn}`);
      const invoke = async (payload: unknown) =>
        (await fn(payload, lambdaContext(stateName, newId(), 15 * 60_000))) as JsonValue;
      handlers[stateName] = callback
        ? (input) =>
            this.invokeWithCallback(
              invoke,
              input as { Payload?: Record<string, JsonValue> },
              timeoutSeconds,
              heartbeatSeconds,
            )
        : invoke;
    }
    // Validated here unless this very text passed before (the constructor throws on an invalid one).
    if (known) return { asl, handlers };
    const { StateMachine } = await stepFunctions();
    const machine = new StateMachine(asl);
    this.validated?.add(text);
    return { asl, machine, handlers };
  }

  /** The state machine of a loaded workflow (built now, unvalidated, when its text was known valid). */
  private async machineOf(loaded: Loaded): Promise<StateMachine> {
    if (!loaded.machine) {
      const { StateMachine } = await stepFunctions();
      loaded.machine ??= new StateMachine(loaded.asl, { validationOptions: { noValidate: true } });
    }
    return loaded.machine;
  }

  private async invokeWithCallback(
    invoke: (payload: unknown) => Promise<JsonValue>,
    params: { Payload?: Record<string, JsonValue> },
    timeoutSeconds: number,
    heartbeatSeconds?: number,
  ): Promise<JsonValue> {
    const token = `local-task-${newId()}`;
    let resolve!: (v: JsonValue) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<JsonValue>((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    // Settled while the step is still being invoked (a stop, a fast callback), it is awaited just after.
    promise.catch(() => undefined);
    // HeartbeatSeconds: the task fails unless a heartbeat (or its completion) comes within that time.
    let beat: NodeJS.Timeout | undefined;
    const heartbeat = () => {
      if (heartbeatSeconds === undefined) return;
      clearTimeout(beat);
      beat = setTimeout(
        () =>
          reject(
            Object.assign(new Error('no heartbeat from the callback task'), {
              name: 'States.HeartbeatTimeout',
            }),
          ),
        heartbeatSeconds * 1000,
      );
      beat.unref();
    };
    heartbeat();
    this.waiting.set(token, { resolve, reject, heartbeat });
    // The library times the task out on its own; this ends our side too, so the token is forgotten.
    const timer = setTimeout(
      () => reject(Object.assign(new Error('callback task timed out'), { name: 'States.Timeout' })),
      timeoutSeconds * 1000,
    );
    timer.unref();
    try {
      await invoke({ ...params.Payload, taskToken: token });
      return await promise;
    } finally {
      clearTimeout(timer);
      clearTimeout(beat);
      this.waiting.delete(token);
    }
  }

  /** Whether a callback task waits on `token` (Step Functions answers TaskDoesNotExist otherwise). */
  isWaiting(token: string): boolean {
    return this.waiting.has(token);
  }

  async heartbeat(token: string): Promise<boolean> {
    const waiter = this.waiting.get(token);
    waiter?.heartbeat();
    return waiter !== undefined;
  }

  async completeTask(token: string, outcome: TaskOutcome): Promise<void> {
    const waiter = this.waiting.get(token);
    if (!waiter) return;
    this.waiting.delete(token);
    if (outcome.ok) waiter.resolve(outcome.output as JsonValue);
    else waiter.reject(Object.assign(new Error(outcome.cause), { name: outcome.error }));
  }

  private loadOnce(workflow: WorkflowName): Promise<Loaded> {
    if (!this.loaded.has(workflow)) this.loaded.set(workflow, this.load(workflow));
    return this.loaded.get(workflow)!;
  }

  /** Load every workflow and its step modules now (the server does at start: a broken one fails it). */
  async preload(): Promise<void> {
    // One at a time: concurrent first imports of shared modules trip Jest's ESM loader (and gain nothing).
    for (const w of Object.keys(workflows) as WorkflowName[]) await this.loadOnce(w);
  }

  /** Build every state machine now (the server does right after it listens, so no start waits for it). */
  async warm(): Promise<void> {
    for (const w of Object.keys(workflows) as WorkflowName[]) await this.machineOf(await this.loadOnce(w));
  }

  async start(workflow: WorkflowName, input: Record<string, unknown>, name: string) {
    const loaded = await this.loadOnce(workflow);
    const machine = await this.machineOf(loaded);
    const { handlers } = loaded;
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
        // Resolves `$$.Task.Token`; callback tasks replace it with a fresh token per invocation.
        Task: { Token: 'local-task-token' },
      },
    });
    const record: ExecutionRecord = {
      executionId,
      workflow,
      input,
      status: 'running',
      transitions: 0,
      startedAt: Date.now(),
    };
    this.executions.set(executionId, record);
    if (this.executions.size > 1000) this.executions.delete(this.executions.keys().next().value!);
    void (async () => {
      for await (const event of execution.eventLogs)
        if (event.type === 'StateEntered' || event.type === 'StateRetried') record.transitions++;
    })().catch(() => undefined);
    const done = execution.result.then(
      (result) => {
        record.status = result === null ? 'aborted' : 'succeeded';
        record.endedAt = Date.now();
      },
      (err: Error) => {
        record.status = 'failed';
        record.endedAt = Date.now();
        log.warn('workflow execution failed', { workflow, executionId, error: err.name });
      },
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
    // Waiting callbacks end now (their executions are aborted), so no task timer keeps the process alive.
    for (const waiter of this.waiting.values())
      waiter.reject(Object.assign(new Error('local workflows stopped'), { name: 'States.Runtime' }));
    this.waiting.clear();
    await this.idle();
  }
}
