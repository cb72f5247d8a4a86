import { newId } from '../../../shared/crypto.js';
import { log } from '../../../shared/log.js';
import { maskSecrets } from '../../../shared/masking/mask.js';
import { prepareRunAccess, type RunAccessCookie } from '../../applications/index.js';
import { releaseDownClaim } from '../../scenarios/index.js';
import { finishRun, RunNotOwned } from '../lifecycle.js';
import {
  loadRun,
  type RunAttemptItem,
  type RunItem,
  type RunStepItem,
  type RunTarget,
  type RunWake,
} from '../store.js';
import { type AttemptOutcome, runAttempt } from './attempt.js';
import { awaitOtherExecutor, claimExecutor } from './claims.js';
import { executorReserveMs, runDeadline } from './deadline.js';
import type { ExecuteDeps, ExecuteInput } from './types.js';
import { neededApps, PreviewNotAwake, wakePreview } from './wake.js';

/**
 * Words that make a variable's name say it holds a secret: `PASSWORD`, `DB_PASS`, `API_TOKEN`,
 * `CLIENT_SECRET`, `PRIVATE_KEY`, `AWS_CREDENTIALS`, `AUTH_HEADER`, `SESSION_COOKIE`… (any case, anywhere
 * in the name). The values of the others (`EMAIL`, `USERNAME`) show in outputs, URLs and traces.
 */
const SECRET_NAME_RE = /PASS|PWD|TOKEN|SECRET|KEY|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION|SIGNATURE|SALT/i;

/**
 * Whether a run variable's value is masked: its name says it is a secret (see SECRET_NAME_RE), or the
 * tests file marks it secret (`secret_variables`, carried onto the run as `marked`).
 */
export const isSecretVariable = (name: string, marked: readonly string[] = []): boolean =>
  SECRET_NAME_RE.test(name) || marked.includes(name);

/**
 * The values to mask in outputs: the run's variables whose names say they are secrets or that the tests
 * file marks secret, and every secret of the environment's apps (always, whatever its name). Fails closed: a bundle that cannot be read means
 * outputs that cannot be masked, so the run does not start (the cause names the app and the error's name,
 * never a value).
 */
async function secretValues(
  deps: ExecuteDeps,
  run: RunItem,
  target: RunTarget,
): Promise<{ values: string[] } | { error: string }> {
  const values = Object.entries(run.variables ?? {})
    .filter(([name]) => isSecretVariable(name, run.secretVariables))
    .map(([, value]) => value);
  for (const app of target.apps) {
    try {
      const bundle = await deps.secrets.read({ applicationId: target.applicationId, app });
      values.push(...Object.values(bundle ?? {}));
    } catch (err) {
      log.warn('could not read a secret bundle to mask run outputs', { app, error: (err as Error).name });
      return {
        error:
          `the secret bundle of app ${app} could not be read (${(err as Error).name}), so the run's output ` +
          'could not be masked: the run did not start; run it again',
      };
    }
  }
  return { values };
}

/**
 * Execute a prepared run (the `Execute` state of `testRun`).
 * Steps: load the run (a run no longer `running` under this attempt was ended meanwhile: RunNotOwned);
 * a host without a browser or ffmpeg ends it `failed` saying what to install; open a browser session
 * (recording a video) and the first page; perform each step within its timeout (the test's, else the
 * default 15 s) and the run's (the test's, else 10 min), recording its output (secrets and variable
 * values masked), the page's URL and a screenshot, and saving it as it ends; after a failure the rest
 * are `skipped`; a browser that dies fails the run with that cause; store the video; end the run
 * `passed` when every step passed, else `failed` with the first failure as its error.
 */
export async function executeRun(deps: ExecuteDeps, input: ExecuteInput): Promise<'passed' | 'failed'> {
  const work = execute(deps, input);
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  executing.add(settled);
  void settled.then(() => executing.delete(settled));
  return work;
}

/** Executions in progress in this process (the local server waits for them when it stops). */
const executing = new Set<Promise<void>>();

/**
 * Resolves once every execution in progress in this process has written its outcome (or after
 * `timeoutMs`). The local server closes the browsers first, so each ends promptly, failed with the reason.
 */
export async function executionsSettled(timeoutMs = 30_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([...executing]),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

async function execute(deps: ExecuteDeps, input: ExecuteInput): Promise<'passed' | 'failed'> {
  // The local server's queue (PREVIEW_RUN_CONCURRENCY): the run's clock starts once it is its turn.
  const turn = await deps.browser.turn?.();
  try {
    return await executeInTurn(deps, input);
  } finally {
    turn?.release();
  }
}

async function executeInTurn(deps: ExecuteDeps, input: ExecuteInput): Promise<'passed' | 'failed'> {
  const now = deps.now ?? Date.now;
  const run = await loadRun(input.runId);
  if (run?.status !== 'running' || run.attempt !== input.attempt)
    throw new RunNotOwned(`run ${input.runId} is no longer run by attempt ${input.attempt}`);
  // The run's clock starts now: the scenario's `up` counts inside its limit.
  const runMs = (run.runTimeoutSeconds ?? deps.runTimeoutSeconds) * 1000;
  const limit = runDeadline({
    now: now(),
    runMs,
    remainingMs: deps.remainingMs?.(),
    scenario: run.scenario !== undefined,
  });
  // A retry of Execute (Step Functions) finds the first invocation's claim: it never runs the steps again.
  const invocation = deps.invocationId ?? newId();
  const claim = await claimExecutor(
    run.runId,
    input.attempt,
    invocation,
    now() + (limit.remainingMs ?? runMs + executorReserveMs({ scenario: true })),
  );
  if (!claim.claimed)
    return awaitOtherExecutor(
      { secrets: deps.secrets, now, ...(deps.claimPollMs ? { pollMs: deps.claimPollMs } : {}) },
      {
        runId: run.runId,
        attempt: input.attempt,
        leaseUntil: claim.leaseUntil,
        until: now() + (limit.remainingMs ?? runMs + executorReserveMs({ scenario: true })) - 5_000,
      },
    );
  // The wait for the preview before the first step, once made (`end` records it).
  let wake: RunWake | undefined;
  const missing = deps.browser.missing();
  if (missing) return end(skipAll(run.steps), missing);
  const secrets = await secretValues(deps, run, input.target);
  if ('error' in secrets) return end(skipAll(run.steps), secrets.error);
  // A protected preview's access cookie, for its own origins only.
  let access: RunAccessCookie[];
  try {
    access = await prepareRunAccess({ secrets: deps.secrets }, run.orgId, input.target);
  } catch (err) {
    return end(
      skipAll(run.steps),
      maskSecrets(`the preview's access cookie could not be made: ${(err as Error).message}`, secrets.values),
    );
  }
  // A sleeping preview is woken, and each app waited for, before the first step and the factory's `up`:
  // a cold start is the environment's, not a step's (wake.ts).
  let target: RunTarget = input.target;
  if (input.target.envKey) {
    const ref = { orgId: run.orgId, envKey: input.target.envKey };
    try {
      const woken = await wakePreview(
        { ...(deps.wake ? { wake: deps.wake } : {}), now },
        {
          ...ref,
          urls: neededApps(input.target, run.scenario !== undefined),
          // The service's own calls go to the apps' own addresses where the runtime has them (local).
          ...(deps.serviceUrls ? { serviceUrls: () => deps.serviceUrls!(ref) } : {}),
          access,
          timeoutMs: Math.min(deps.wakeTimeoutSeconds * 1000, Math.max(0, limit.at - now())),
          setting: 'PREVIEW_WAKE_TIMEOUT_SECONDS',
        },
      );
      wake = woken.wake;
      if (woken.serviceUrls && Object.keys(woken.serviceUrls).length)
        target = { ...input.target, serviceUrls: woken.serviceUrls };
    } catch (err) {
      if (!(err instanceof PreviewNotAwake)) throw err;
      const error = maskSecrets(err.message, secrets.values);
      return end(skipAll(run.steps), error, undefined, undefined, undefined, { errorKind: 'environment' });
    }
  }
  // Retries: a failed attempt with retries left runs again (fresh session, media and scenario tokens),
  // while the run's deadline leaves time for one; the last attempt's steps and media are the run's.
  const retries = Math.max(0, Math.min(3, run.retries ?? 0));
  const attempts: RunAttemptItem[] = [];
  let outcome: AttemptOutcome;
  for (let number = 1; ; number++) {
    outcome = await runAttempt({
      deps,
      run,
      owner: input.attempt,
      target,
      number,
      limit,
      runMs,
      stepMs: (run.stepTimeoutSeconds ?? deps.stepTimeoutSeconds) * 1000,
      invocation,
      now,
      masked: secrets.values,
      access,
    });
    attempts.push(attemptItem(outcome));
    if (outcome.status === 'passed' || number > retries) break;
    if (limit.at - now() < MIN_RETRY_MS) break;
    // Its `down` was sent under a claim: the next attempt's scenario claims its own.
    if (run.scenario && !(await releaseDownClaim(run.runId, input.attempt)))
      throw new RunNotOwned(`run ${input.runId} is no longer run by attempt ${input.attempt}`);
  }
  const flaky = outcome.status === 'passed' && attempts.length > 1;
  return end(outcome.steps, outcome.error, outcome.videoKey, outcome.traceKey, {
    attempts,
    flaky,
    ...(outcome.refusedOrigins ? { refusedOrigins: outcome.refusedOrigins } : {}),
  });

  async function end(
    steps: RunStepItem[],
    error?: string,
    videoKey?: string,
    traceKey?: string,
    tries?: { attempts: RunAttemptItem[]; flaky: boolean; refusedOrigins?: string[] },
    kind?: { errorKind: 'environment' },
  ) {
    const status = error === undefined ? 'passed' : 'failed';
    const healedSteps = steps.filter((s) => s.healed).length;
    await finishRun(run!, input.attempt, {
      status,
      steps,
      error,
      videoKey,
      traceKey,
      ...tries,
      ...(healedSteps ? { healedSteps } : {}),
      ...kind,
      ...(wake ? { wake } : {}),
    });
    return status;
  }
}

/** A retry starts only with this much of the run's time left (else the last failure stands). */
const MIN_RETRY_MS = 5_000;

/** What the run's record keeps of an attempt. */
const attemptItem = (o: AttemptOutcome): RunAttemptItem => ({
  number: o.number,
  status: o.status,
  ...(o.error !== undefined ? { error: o.error.slice(0, 2000) } : {}),
  steps: o.steps.map((s) => s.status),
  ...(o.videoKey !== undefined ? { videoKey: o.videoKey } : {}),
  ...(o.traceKey !== undefined ? { traceKey: o.traceKey } : {}),
  startedAt: o.startedAt,
  endedAt: o.endedAt,
});

/** Every step of a run that never ran: `skipped`. */
const skipAll = (steps: RunStepItem[]): RunStepItem[] =>
  steps.map((s) => ({ ...s, status: 'skipped', output: '' }));
