/**
 * The readiness half of the `AppRunner` role on the cluster (eks/cluster.ts has the story; the deploy is
 * eks/apps.ts): `awaitReady` starts the rollout watcher (a Lambda, functions/watchers/rollout.ts, invoked
 * asynchronously) and returns; the watcher (`watch`) checks every `pollMs` for up to `sliceMs` per
 * invocation, then invokes itself again, until every app is ready (the token completes with their https
 * URLs), one fails (`DeployFailed` naming the app, the reason, and its last log lines with the secret
 * values masked), a newer generation owns the environment (`Superseded`), or the deadline passes.
 */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { ConfigError } from '../../../shared/errors.js';
import { log } from '../../../shared/log.js';
import { TransientError } from '../../../shared/step-errors.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { AppSpec, RuntimeTarget } from '../port.js';
import { KubeError } from './client.js';
import { type EksConnection, sleep, terminating } from './connection.js';
import { fenceGeneration } from './fences.js';
import { LambdaInvoker } from './lambda-invoke.js';
import { failureCause } from './logs.js';
import { generationOf, LABELS, namespaceName, objectName, publicUrl } from './objects.js';
import { newest, podFailure, podSummary, rolloutState } from './rollout.js';
import { advanceSetup } from './services/setup.js';

/** What the rollout watcher is invoked with. No secret values: it reads what it masks from the cluster. */
export interface RolloutWatchEvent {
  target: RuntimeTarget;
  /** Every app of the environment (the token's URLs are theirs). */
  apps: string[];
  token: string;
  /** Epoch ms: past it, the token fails with what was still pending. */
  deadline: number;
  /** How many invocations watched before this one. */
  hop: number;
  startedAt: number;
}

export type WatchOutcome = 'ready' | 'failed' | 'superseded' | 'timed-out' | 'continued' | 'abandoned';

/** How the watch is started and how it ends its task: what the connection does not hold. */
export interface EksWatchOptions {
  /**
   * Ends a callback task (`Workflows.completeTask`): what the watcher (`watch`) completes the deploy's
   * task with. Only the watcher needs it; deploy, teardown and logs complete nothing.
   */
  complete?: (token: string, outcome: TaskOutcome) => Promise<void>;
  /**
   * Sends a task heartbeat (`Workflows.heartbeat`), at the start of every watcher invocation and every
   * `heartbeatMs`. Answering 'gone' (the task no longer waits) stops the watcher. Without it the watcher
   * sends none, so the waiting state must then have no HeartbeatSeconds.
   */
  heartbeat?: (token: string) => Promise<undefined | 'gone'>;
  /**
   * Starts a watcher invocation asynchronously. Default: Lambda `Invoke` (InvocationType `Event`) of
   * `watcherFunction` through `lambda` (eks/lambda-invoke.ts). Tests run the watcher in-process instead.
   */
  invokeWatcher?: (event: RolloutWatchEvent) => Promise<void>;
  /** The watcher Lambda's name or ARN (default: `ROLLOUT_WATCHER_FUNCTION`). */
  watcherFunction?: string;
  /**
   * The Lambda client the watcher invocations go through (the registry passes the container's,
   * registry/aws-clients.ts `lambdaClient()`). Needed only by a cluster that starts the watcher without
   * `invokeWatcher`.
   */
  lambda?: LambdaClient;
}

/** A watcher stops this long before its invocation's time runs out, to hand over in time. */
const SLICE_MARGIN_MS = 15_000;

type AppVerdict =
  | { kind: 'ready' }
  | { kind: 'pending'; detail: string }
  | { kind: 'failed'; cause: string }
  | { kind: 'superseded'; cause: string };
type Verdict =
  | { kind: 'ready'; urls: Record<string, string> }
  | { kind: 'pending'; detail: string }
  | { kind: 'failed'; cause: string }
  | { kind: 'superseded'; cause: string };

export class EksRolloutWatch {
  private lambda?: LambdaInvoker;

  constructor(
    private readonly conn: EksConnection,
    private readonly opts: EksWatchOptions = {},
  ) {}

  async awaitReady(target: RuntimeTarget, apps: Record<string, AppSpec>, token: string): Promise<void> {
    const now = Date.now();
    const event: RolloutWatchEvent = {
      target,
      apps: Object.keys(apps).sort(),
      token,
      deadline: now + this.conn.timing.readyTimeoutMs,
      hop: 0,
      startedAt: now,
    };
    await this.startWatcher(event);
  }

  private async startWatcher(event: RolloutWatchEvent): Promise<void> {
    try {
      await (this.opts.invokeWatcher ?? ((e) => this.invokeLambda(e)))(event);
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new TransientError(`could not start the rollout watcher: ${(err as Error).message}`);
    }
  }

  private async invokeLambda(event: RolloutWatchEvent): Promise<void> {
    const fn = this.opts.watcherFunction ?? process.env.ROLLOUT_WATCHER_FUNCTION;
    if (!fn) throw new ConfigError('ROLLOUT_WATCHER_FUNCTION is not set: the stack sets it for the runtime');
    if (!this.opts.lambda)
      throw new ConfigError('this EKS cluster adapter has no Lambda client to start the rollout watcher');
    this.lambda ??= new LambdaInvoker(this.opts.lambda);
    await this.lambda.invokeAsync(fn, event);
  }

  /** Ends a task (the watcher's): `complete` is required of a cluster that watches. */
  private async completeTask(token: string, outcome: TaskOutcome): Promise<void> {
    if (!this.opts.complete)
      throw new ConfigError('this EKS cluster adapter completes no tasks (no `complete`)');
    await this.opts.complete(token, outcome);
  }

  /**
   * One watcher invocation: check every `pollMs` until the rollout ends (the token is completed), the
   * deadline passes (DeployFailed), or this invocation's slice is used up (the next one is started).
   * `remainingMs` is the invocation's own time left (Lambda's `getRemainingTimeInMillis`).
   */
  async watch(event: RolloutWatchEvent, remainingMs: () => number = () => Number.POSITIVE_INFINITY) {
    const t = this.conn.timing;
    const sliceEnd = Date.now() + Math.max(1000, Math.min(t.sliceMs, remainingMs() - SLICE_MARGIN_MS));
    const fields = { namespace: namespaceName(event.target), generation: event.target.generation };
    let lastBeat = Number.NEGATIVE_INFINITY;
    let pending = 'not checked yet';
    for (;;) {
      if (this.opts.heartbeat && Date.now() - lastBeat >= t.heartbeatMs) {
        lastBeat = Date.now();
        try {
          if ((await this.opts.heartbeat(event.token)) === 'gone') {
            log.info('rollout watch abandoned: the task no longer waits', fields);
            return this.outcome('abandoned', event);
          }
        } catch (err) {
          log.warn('task heartbeat failed', { ...fields, error: (err as Error).name });
        }
      }
      let verdict: Verdict;
      try {
        verdict = await this.check(event);
      } catch (err) {
        const e = KubeError.from('check the rollout', err);
        log.warn('rollout check failed', { ...fields, code: e.code, reason: e.reason });
        // Refused (the runtime's access to the cluster is wrong): that won't pass by waiting.
        if (e.code === 401 || e.code === 403)
          verdict = { kind: 'failed', cause: `the cluster refused to ${e.message}` };
        // Not answered this time: keep watching until the deadline.
        else verdict = { kind: 'pending', detail: `the cluster did not answer (${e.code || 'unreachable'})` };
      }
      if (verdict.kind !== 'pending') {
        await this.finish(event, verdict);
        log.info('rollout watch ended', { ...fields, outcome: verdict.kind, hop: event.hop });
        return this.outcome(verdict.kind, event);
      }
      pending = verdict.detail;
      const now = Date.now();
      if (now >= event.deadline) {
        const seconds = Math.round((event.deadline - event.startedAt) / 1000);
        const within = seconds < 120 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
        await this.completeTask(event.token, {
          ok: false,
          error: 'DeployFailed',
          cause: `not ready within ${within}: ${pending}`,
        });
        log.info('rollout watch ended', { ...fields, outcome: 'timed-out', hop: event.hop });
        return this.outcome('timed-out', event);
      }
      if (now + t.pollMs >= sliceEnd) {
        await this.startWatcher({ ...event, hop: event.hop + 1 });
        log.info('rollout watch continues in a new invocation', { ...fields, hop: event.hop + 1 });
        return this.outcome('continued', event);
      }
      await sleep(Math.min(t.pollMs, event.deadline - now));
    }
  }

  private outcome(outcome: WatchOutcome, event: RolloutWatchEvent) {
    return { outcome, hop: event.hop };
  }

  private async finish(event: RolloutWatchEvent, verdict: Exclude<Verdict, { kind: 'pending' }>) {
    const outcome: TaskOutcome =
      verdict.kind === 'ready'
        ? { ok: true, output: { urls: verdict.urls } }
        : {
            ok: false,
            error: verdict.kind === 'failed' ? 'DeployFailed' : 'Superseded',
            cause: verdict.cause,
          };
    await this.completeTask(event.token, outcome);
  }

  /** One look at the environment's rollout. */
  private async check(event: RolloutWatchEvent): Promise<Verdict> {
    const { target } = event;
    const name = namespaceName(target);
    const ns = await this.conn.readOrNull('namespaces', '', name);
    const current = generationOf(ns);
    if (current > target.generation)
      return { kind: 'superseded', cause: `generation ${current} owns ${name} now` };
    if (!ns || terminating(ns)) {
      const fence = await fenceGeneration(this.conn, name);
      if (fence >= target.generation)
        return { kind: 'superseded', cause: `a teardown (generation ${fence}) removed ${name}` };
      return {
        kind: 'failed',
        cause: `namespace ${name} ${ns ? 'is being deleted' : 'is gone'}, though no teardown asked for it`,
      };
    }
    // The environment's services ready and its migrate and seed Jobs run, before its apps may start.
    const setup = await advanceSetup(this.conn, target);
    if (setup.kind !== 'done') return setup;
    const verdicts = await Promise.all(
      event.apps.map(async (app) => [app, await this.checkApp(target, name, app)] as const),
    );
    const superseded = verdicts.find(([, v]) => v.kind === 'superseded');
    if (superseded) return superseded[1] as Verdict;
    const failed = verdicts.filter(([, v]) => v.kind === 'failed');
    if (failed.length)
      return { kind: 'failed', cause: failed.map(([, v]) => (v as { cause: string }).cause).join('; ') };
    const pending = verdicts.filter(([, v]) => v.kind === 'pending');
    if (pending.length)
      return { kind: 'pending', detail: pending.map(([, v]) => (v as { detail: string }).detail).join('; ') };
    return {
      kind: 'ready',
      urls: Object.fromEntries(event.apps.map((app) => [app, publicUrl(name, app, this.conn.opts.domain)])),
    };
  }

  private async checkApp(target: RuntimeTarget, ns: string, app: string): Promise<AppVerdict> {
    const { conn } = this;
    const gen = target.generation;
    const name = objectName(app);
    const deployment = await conn.readOrNull('deployments', ns, name);
    if (!deployment)
      return { kind: 'failed', cause: `app ${app}: not deployed (no Deployment ${ns}/${name})` };
    const current = generationOf(deployment);
    if (current > gen) return { kind: 'superseded', cause: `generation ${current} rolled ${app} since` };
    const state = rolloutState(deployment);
    if (state.state === 'ready') return { kind: 'ready' };
    const rollout = deployment.spec?.template?.metadata?.labels?.[LABELS.rollout];
    const selector = `${LABELS.app}=${app}${rollout ? `,${LABELS.rollout}=${rollout}` : ''}`;
    const pods = await conn.call(`list pods of ${ns}/${name}`, (k) => k.pods.list(ns, selector));
    const failure = pods.map(podFailure).find((f) => f !== undefined);
    if (failure)
      return {
        kind: 'failed',
        cause: await failureCause(conn, target, ns, app, failure, failure.pod, failure.ran),
      };
    if (state.state === 'failed') {
      const pod = newest(pods);
      const podName = pod?.metadata?.name;
      const message = `${state.message}${pod ? ` (pod ${podName}: ${podSummary(pod)})` : ''}`;
      return {
        kind: 'failed',
        cause: await failureCause(conn, target, ns, app, { reason: state.reason, message }, podName, false),
      };
    }
    return { kind: 'pending', detail: `${app}: ${state.detail}` };
  }
}
