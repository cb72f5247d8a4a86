import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { workflows as manifest, type WorkflowDef } from '../../manifest/workflows.js';
import { setLogSink } from '../../shared/log.js';
import { type ExecutionRecord, LocalWorkflows } from './local-asl.js';
import { workflowsContract } from './workflows.contract.js';

/*
 * LocalWorkflows without DynamoDB or a runtime: a repository root holding the project's own ASL files
 * and, at every step entry the manifest names, a stand-in step that hands its event to the test (by state
 * name). The tests play the runtime: they end callback tasks through `completeTask`.
 */

const REPO_ROOT = new URL('../../..', import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), 'local-workflows-'));
const logs: string[] = [];
setLogSink((line) => logs.push(line));

type Step = (event: any) => Promise<unknown>;
interface Call {
  state: string;
  event: any;
}
const calls: Call[] = [];
/** Per state: what its stand-in step does (default: record the call and return its input). */
let behaviour: Record<string, Step> = {};
(globalThis as any).__localWorkflowsTest = async (state: string, event: unknown) => {
  calls.push({ state, event });
  const step = behaviour[state];
  return step ? step(event) : event;
};
/** Plain JavaScript (valid TypeScript), so it loads however the entry is imported. */
const STAND_IN =
  'export const handler = (event, context) => globalThis.__localWorkflowsTest(context.functionName, event);\n';

/** A repository root: the manifest's step entries as stand-ins, and `asl` (path → document) or the real ASL. */
function repoRoot(asl?: Record<string, unknown>): string {
  const root = mkdtempSync(join(tmp, 'root-'));
  for (const def of Object.values(manifest) as WorkflowDef[]) {
    for (const task of Object.values(def.tasks)) {
      mkdirSync(dirname(join(root, task.entry)), { recursive: true });
      writeFileSync(join(root, task.entry), STAND_IN);
    }
    const target = join(root, def.definition);
    mkdirSync(dirname(target), { recursive: true });
    if (asl?.[def.definition]) writeFileSync(target, JSON.stringify(asl[def.definition]));
    else cpSync(join(REPO_ROOT, def.definition), target);
  }
  return root;
}

let realRoot: string;
let running: LocalWorkflows[] = [];
function newWorkflows(root = realRoot): LocalWorkflows {
  const wf = new LocalWorkflows(root);
  running.push(wf);
  return wf;
}

beforeAll(() => {
  realRoot = repoRoot();
});
afterEach(async () => {
  await Promise.all(running.map((w) => w.stop()));
  running = [];
  calls.length = 0;
  behaviour = {};
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
  delete (globalThis as any).__localWorkflowsTest;
});

workflowsContract('LocalWorkflows', () => newWorkflows());

/** An ASL `${Name}` placeholder, which LocalWorkflows replaces with the manifest task's local ARN. */
const placeholder = (name: string) => `\${${name}}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const callsOf = (state: string) => calls.filter((c) => c.state === state);
/** The `n`th (1-based) call of `state`, once it has happened. */
async function called(state: string, n = 1, ms = 5_000): Promise<Call> {
  const deadline = Date.now() + ms;
  while (callsOf(state).length < n) {
    if (Date.now() > deadline) throw new Error(`${state} was not called ${n} time(s)`);
    await sleep(5);
  }
  return callsOf(state)[n - 1]!;
}
const record = (wf: LocalWorkflows, executionId: string): ExecutionRecord => wf.executions.get(executionId)!;
async function settledRecord(wf: LocalWorkflows, executionId: string): Promise<ExecutionRecord> {
  await wf.idle();
  return record(wf, executionId);
}

const INPUT = { orgId: 'org1', envKey: 'acme/shop#1', generation: 3 };
let seq = 0;
const startDeploy = async (wf: LocalWorkflows, input: Record<string, unknown> = INPUT) =>
  (await wf.start('deploy', input, `exec-${++seq}`)).executionId;

describe('LocalWorkflows: callback tasks', () => {
  test('a callback step gets the state input and a fresh token; the execution waits for completeTask', async () => {
    const wf = newWorkflows();
    // The Lambda's own return value is not the task's result.
    behaviour.BuildImages = async () => ({ ignored: 'build' });
    behaviour.DeployApps = async () => ({ ignored: 'deploy' });
    const id = await startDeploy(wf);
    expect(id).toMatch(/^local:deploy:exec-\d+$/);

    const build = await called('BuildImages');
    expect(build.event).toEqual({ input: INPUT, taskToken: expect.stringMatching(/^local-task-.+/) });
    expect(build.event.taskToken).not.toBe('local-task-token'); // not the execution-wide placeholder
    await sleep(100);
    expect(record(wf, id).status).toBe('running');
    expect(callsOf('DeployApps')).toHaveLength(0); // waiting on the callback, not on the Lambda

    const images = { web: 'registry/app@sha256:1' };
    await wf.completeTask(build.event.taskToken, { ok: true, output: { images } });
    const deploy = await called('DeployApps');
    // BuildImages has `ResultPath: $.built`: its output (the images) joins the input for DeployApps.
    expect(deploy.event).toEqual({
      input: { ...INPUT, built: { images } },
      taskToken: expect.stringMatching(/^local-task-.+/),
    });
    expect(deploy.event.taskToken).not.toBe(build.event.taskToken); // one token per task invocation

    const urls = { web: 'http://127.0.0.1:4000' };
    await wf.completeTask(deploy.event.taskToken, { ok: true, output: { urls } });
    const done = await settledRecord(wf, id);
    expect(done.status).toBe('succeeded');
    expect((await called('MarkReady')).event).toEqual({ ...INPUT, built: { images }, ready: { urls } });
    expect(callsOf('MarkFailed')).toHaveLength(0);
    expect(done.endedAt).toBeGreaterThanOrEqual(done.startedAt);
  });

  test('a token completed before its step returns is not lost', async () => {
    const wf = newWorkflows();
    // A runtime that finishes at once: the token is completed inside the Lambda invocation.
    behaviour.BuildImages = async (event) => {
      await wf.completeTask(event.taskToken, { ok: true, output: {} });
      return undefined;
    };
    behaviour.DeployApps = async (event) => {
      await wf.completeTask(event.taskToken, { ok: true, output: { urls: {} } });
      return undefined;
    };
    const id = await startDeploy(wf);
    expect((await settledRecord(wf, id)).status).toBe('succeeded');
    expect((await called('MarkReady')).event.ready).toEqual({ urls: {} });
  });

  test('a failure named Superseded ends the execution quietly: no later step, nothing marked failed', async () => {
    const wf = newWorkflows();
    const id = await startDeploy(wf);
    const build = await called('BuildImages');
    await wf.completeTask(build.event.taskToken, {
      ok: false,
      error: 'Superseded',
      cause: 'a newer build replaced this one',
    });
    expect((await settledRecord(wf, id)).status).toBe('succeeded');
    expect(calls.map((c) => c.state)).toEqual(['FetchSource', 'ReadConfig', 'BuildImages']);
  });

  test('any other failure is caught with its name and cause and the environment marked failed', async () => {
    const wf = newWorkflows();
    const id = await startDeploy(wf);
    await wf.completeTask((await called('BuildImages')).event.taskToken, { ok: true, output: {} });
    const deploy = await called('DeployApps');
    await wf.completeTask(deploy.event.taskToken, {
      ok: false,
      error: 'DeployFailed',
      cause: 'app web did not become ready within 3 s',
    });
    expect((await settledRecord(wf, id)).status).toBe('failed');
    expect((await called('MarkFailed')).event).toEqual({
      ...INPUT,
      built: {},
      failure: { Error: 'DeployFailed', Cause: 'app web did not become ready within 3 s' },
    });
    expect(callsOf('MarkReady')).toHaveLength(0);
  });

  test('a callback step that throws fails its task, and its token is dead afterwards', async () => {
    const wf = newWorkflows();
    behaviour.BuildImages = async () => {
      throw Object.assign(new Error('app web: preview.yaml has no command'), { name: 'DeployFailed' });
    };
    const id = await startDeploy(wf);
    const build = await called('BuildImages');
    expect((await settledRecord(wf, id)).status).toBe('failed');
    expect((await called('MarkFailed')).event.failure).toEqual({
      Error: 'DeployFailed',
      Cause: 'app web: preview.yaml has no command',
    });
    // A runtime completing the token of a task that already ended changes nothing.
    await wf.completeTask(build.event.taskToken, { ok: true, output: {} });
    await sleep(50);
    expect(callsOf('DeployApps')).toHaveLength(0);
    expect(record(wf, id).status).toBe('failed');
  });

  test('a retried callback step gets a new token; the first one is dead', async () => {
    const wf = newWorkflows();
    let attempts = 0;
    behaviour.BuildImages = async () => {
      attempts++;
      if (attempts === 1) throw Object.assign(new Error('throttled'), { name: 'TransientError' });
      return undefined;
    };
    const id = await startDeploy(wf);
    const first = await called('BuildImages', 1);
    const second = await called('BuildImages', 2); // the ASL retries TransientError after ≤ 1 s (full jitter)
    expect(second.event.taskToken).not.toBe(first.event.taskToken);

    await wf.completeTask(first.event.taskToken, { ok: false, error: 'DeployFailed', cause: 'stale' });
    await sleep(50);
    expect(record(wf, id).status).toBe('running');
    expect(callsOf('MarkFailed')).toHaveLength(0);

    await wf.completeTask(second.event.taskToken, { ok: true, output: {} });
    await wf.completeTask((await called('DeployApps')).event.taskToken, { ok: true, output: { urls: {} } });
    const done = await settledRecord(wf, id);
    expect(done.status).toBe('succeeded');
    await sleep(20); // the event log is read asynchronously
    // A retry is a state transition too (Step Functions bills it): the usual 5, plus 1.
    expect(done.transitions).toBe(6);
  }, 15_000);

  test('a token completes its task once: a second completion is ignored', async () => {
    const wf = newWorkflows();
    const id = await startDeploy(wf);
    const token = (await called('BuildImages')).event.taskToken;
    await wf.completeTask(token, { ok: true, output: {} });
    await wf.completeTask(token, { ok: false, error: 'DeployFailed', cause: 'late' });
    await wf.completeTask((await called('DeployApps')).event.taskToken, { ok: true, output: { urls: {} } });
    expect((await settledRecord(wf, id)).status).toBe('succeeded');
    expect(callsOf('MarkFailed')).toHaveLength(0);
    expect(callsOf('BuildImages')).toHaveLength(1);
  });

  test('completeTask with an unknown token resolves and does nothing', async () => {
    const wf = newWorkflows();
    const id = await startDeploy(wf);
    await called('BuildImages');
    await expect(wf.completeTask('local-task-unknown', { ok: true, output: {} })).resolves.toBeUndefined();
    await expect(
      wf.completeTask('local-task-token', { ok: false, error: 'DeployFailed', cause: 'x' }),
    ).resolves.toBeUndefined();
    await sleep(50);
    expect(record(wf, id).status).toBe('running');
    expect(callsOf('DeployApps')).toHaveLength(0);
    expect(callsOf('MarkFailed')).toHaveLength(0);
    // And with nothing running at all.
    await expect(
      newWorkflows().completeTask('local-task-x', { ok: true, output: {} }),
    ).resolves.toBeUndefined();
    // The execution still waits on its own token.
    await wf.completeTask(callsOf('BuildImages')[0]!.event.taskToken, {
      ok: false,
      error: 'Superseded',
      cause: '',
    });
    expect((await settledRecord(wf, id)).status).toBe('succeeded');
  });

  test('stop() aborts an execution waiting on a callback; its token is dead afterwards', async () => {
    // The project's ASL with a short callback timeout: aws-local-stepfunctions leaves a task's timeout timer
    // armed when an execution is aborted mid-task (3600 s for BuildImages), which would keep Jest alive.
    const asl = JSON.parse(readFileSync(join(REPO_ROOT, 'statemachines/deploy.asl.json'), 'utf8'));
    asl.States.BuildImages.TimeoutSeconds = 1;
    const wf = newWorkflows(repoRoot({ 'statemachines/deploy.asl.json': asl }));
    const id = await startDeploy(wf);
    const token = (await called('BuildImages')).event.taskToken;
    await wf.stop();
    expect(record(wf, id)).toMatchObject({ status: 'aborted', endedAt: expect.any(Number) });
    await wf.completeTask(token, { ok: true, output: {} });
    await sleep(1_200); // past the task's timeout: that firing changes nothing either
    expect(calls.map((c) => c.state)).toEqual(['FetchSource', 'ReadConfig', 'BuildImages']);
    expect(record(wf, id).status).toBe('aborted');
  });

  test('a callback that never comes times out (States.Timeout, caught); a late completion is ignored', async () => {
    const timeoutOnly = {
      StartAt: 'Wait',
      States: {
        Wait: {
          Type: 'Task',
          Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
          Parameters: {
            FunctionName: placeholder('TearDownFunctionArn'),
            Payload: { 'input.$': '$', 'taskToken.$': '$$.Task.Token' },
          },
          TimeoutSeconds: 1,
          Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'MarkFailed' }],
          End: true,
        },
        MarkFailed: { Type: 'Task', Resource: placeholder('MarkFailedFunctionArn'), End: true },
      },
    };
    const wf = newWorkflows(repoRoot({ 'statemachines/teardown.asl.json': timeoutOnly }));
    const { executionId } = await wf.start('teardown', INPUT, 'timeout');
    const token = (await called('Wait')).event.taskToken;
    expect((await settledRecord(wf, executionId)).status).toBe('succeeded');
    expect((await called('MarkFailed')).event.failure).toMatchObject({ Error: 'States.Timeout' });

    await wf.completeTask(token, { ok: true, output: {} });
    await sleep(50);
    expect(callsOf('MarkFailed')).toHaveLength(1);
    expect(record(wf, executionId).status).toBe('succeeded');
  }, 10_000);
});

describe('LocalWorkflows: HeartbeatSeconds', () => {
  const heartbeatOnly = {
    StartAt: 'Wait',
    States: {
      Wait: {
        Type: 'Task',
        Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
        Parameters: {
          FunctionName: placeholder('TearDownFunctionArn'),
          Payload: { 'input.$': '$', 'taskToken.$': '$$.Task.Token' },
        },
        TimeoutSeconds: 30,
        HeartbeatSeconds: 1,
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.failure', Next: 'MarkFailed' }],
        End: true,
      },
      MarkFailed: { Type: 'Task', Resource: placeholder('MarkFailedFunctionArn'), End: true },
    },
  };

  test('a callback task without a heartbeat for HeartbeatSeconds fails (States.HeartbeatTimeout)', async () => {
    const wf = newWorkflows(repoRoot({ 'statemachines/teardown.asl.json': heartbeatOnly }));
    const started = Date.now();
    const { executionId } = await wf.start('teardown', INPUT, 'no-heartbeat');
    await called('Wait');
    expect((await settledRecord(wf, executionId)).status).toBe('succeeded');
    expect((await called('MarkFailed')).event.failure).toMatchObject({ Error: 'States.HeartbeatTimeout' });
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 10_000);

  test('heartbeats keep it waiting past HeartbeatSeconds until it completes', async () => {
    const wf = newWorkflows(repoRoot({ 'statemachines/teardown.asl.json': heartbeatOnly }));
    const { executionId } = await wf.start('teardown', INPUT, 'heartbeats');
    const token = (await called('Wait')).event.taskToken;
    for (let i = 0; i < 5; i++) {
      await sleep(400);
      await wf.heartbeat(token);
    }
    await wf.completeTask(token, { ok: true, output: { done: true } });
    expect((await settledRecord(wf, executionId)).status).toBe('succeeded');
    expect(callsOf('MarkFailed')).toHaveLength(0);
  }, 10_000);
});

describe('LocalWorkflows: loading', () => {
  test("every state machine's tasks resolve to a manifest step (preload)", async () => {
    await expect(newWorkflows().preload()).resolves.toBeUndefined();
  });

  test('a Task whose resource is no manifest step fails the start, naming the state and the ARN', async () => {
    const stray = {
      StartAt: 'Stray',
      States: {
        Stray: { Type: 'Task', Resource: 'arn:aws:lambda:local:000000000000:function:Nope', End: true },
      },
    };
    const wf = newWorkflows(repoRoot({ 'statemachines/teardown.asl.json': stray }));
    await expect(wf.start('teardown', INPUT, 'stray')).rejects.toThrow(
      'statemachines/teardown.asl.json: state Stray has no local handler for arn:aws:lambda:local:000000000000:function:Nope',
    );
    expect(wf.executions.size).toBe(0);
  });

  test('transitions count the states entered', async () => {
    const wf = newWorkflows();
    behaviour.BuildImages = async (event) => {
      await wf.completeTask(event.taskToken, { ok: true, output: {} });
    };
    behaviour.DeployApps = async (event) => {
      await wf.completeTask(event.taskToken, { ok: true, output: { urls: {} } });
    };
    const id = await startDeploy(wf);
    await wf.idle();
    await sleep(20); // the event log is read asynchronously
    // FetchSource, ReadConfig, BuildImages, DeployApps, MarkReady.
    expect(record(wf, id).transitions).toBe(5);
  });
});
