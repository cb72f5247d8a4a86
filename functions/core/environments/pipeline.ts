import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { artifactKeys } from '../../manifest/tables.js';
import type { Artifacts } from '../../ports/artifacts/port.js';
import type {
  AppSpec,
  AppTeardown,
  BuildInputs,
  BuildResult,
  RuntimeTarget,
  ServiceSpec,
  ServiceState,
} from '../../ports/runtime/port.js';
import type { SourceHost } from '../../ports/source-host/port.js';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { log } from '../../shared/log.js';
import { DeployFailed, Superseded } from '../../shared/step-errors.js';
import { findEnvironment } from './lifecycle.js';
import { serviceStates } from './services.js';
import type { Environment, EnvironmentStatus } from './types.js';

export { DeployFailed, Superseded, TransientError } from '../../shared/step-errors.js';

/** What every step receives: the environment and the generation the execution was started for. */
export interface StepInput {
  orgId: string;
  envKey: string;
  generation: number;
  app?: string;
  mode?: 'rebuild' | 'restart';
  /**
   * Set by BuildImages: the images the runtime built or reused (app → `uri@digest`; none locally), and
   * which apps it built and which it reused (`builds`).
   */
  built?: { images?: Record<string, string>; builds?: Record<string, BuildResult> };
  /** Set by a Catch: `{ Error, Cause }` of the failed state. */
  failure?: { Error?: string; Cause?: string };
}

/** What a callback task's Lambda receives: the state input and the token that ends the task. */
export interface CallbackEvent {
  input: StepInput;
  taskToken: string;
}

/**
 * Stage the tree of `sha` as a gzipped tarball in the artifacts store, under a key shared by every
 * environment of the organization that builds this repository at this commit. Idempotent: an archive
 * already there is kept.
 */
export async function stageSource(
  deps: { sourceHost: SourceHost; artifacts: Artifacts },
  env: Pick<Environment, 'orgId' | 'repoFullName'>,
  sha: string,
): Promise<{ key: string; reused: boolean }> {
  const key = artifactKeys.source(env.orgId, env.repoFullName, sha);
  if (await deps.artifacts.exists(key)) return { key, reused: true };
  await deps.artifacts.put(key, await deps.sourceHost.archive(env.repoFullName, sha), 'application/gzip');
  return { key, reused: false };
}

/** The environment, if this execution's generation is still the current one; otherwise `Superseded`. */
export async function loadCurrent(input: StepInput): Promise<Environment> {
  const env = await findEnvironment(input.orgId, input.envKey);
  if (!env || env.generation !== input.generation)
    throw new Superseded(`generation ${input.generation} superseded`);
  return env;
}

/**
 * Whether a generation still owns the environment (read consistently): what a runtime asks right before
 * it starts work that outlives the step (an image build), and before it reports one that finished.
 */
export async function isCurrent(ref: Pick<StepInput, 'orgId' | 'envKey' | 'generation'>): Promise<boolean> {
  const env = await findEnvironment(ref.orgId, ref.envKey);
  return env !== undefined && env.generation === ref.generation;
}

export interface Transition {
  status?: EnvironmentStatus;
  phase?: string;
  apps?: string[];
  appSpecs?: Record<string, AppSpec>;
  serviceSpecs?: Record<string, ServiceSpec>;
  services?: Record<string, ServiceState>;
  buildInputs?: Record<string, BuildInputs>;
  builds?: Record<string, BuildResult>;
  factory?: { app: string; path: string };
  access?: 'protected' | 'public';
  urls?: Record<string, string>;
  images?: Record<string, string>;
  lastDeployedSha?: string;
  error?: string;
  stoppedApps?: Record<string, string>;
}

/**
 * Write a status/phase change, only if the execution's generation is still current (a conditional write,
 * so a late step of a superseded execution can never overwrite newer state). `remove` drops attributes.
 */
export async function transition(input: StepInput, set: Transition, remove: (keyof Transition)[] = []) {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':g': input.generation, ':now': new Date().toISOString() };
  const sets = ['updatedAt = :now'];
  for (const [k, v] of Object.entries(set)) {
    if (v === undefined) continue;
    names[`#${k}`] = k;
    values[`:${k}`] = v;
    sets.push(`#${k} = :${k}`);
  }
  for (const k of remove) names[`#${k}`] = k;
  const removeClause = remove.length ? ` REMOVE ${remove.map((k) => `#${k}`).join(', ')}` : '';
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: input.orgId, envKey: input.envKey },
        UpdateExpression: `SET ${sets.join(', ')}${removeClause}`,
        ConditionExpression: 'generation = :g',
        ExpressionAttributeNames: Object.keys(names).length ? names : undefined,
        ExpressionAttributeValues: values,
      }),
    );
  } catch (err) {
    if (isConditionFailure(err)) throw new Superseded(`generation ${input.generation} superseded`);
    throw err;
  }
}

/**
 * A failed environment keeps nothing running (MarkFailed, once `failed` is recorded for this generation).
 * Steps: stop every app the runtime still runs for the environment (and its builds in progress); record
 * which were stopped and why as `stoppedApps` (none: the attribute goes) and empty `urls`, on the
 * condition that the generation is still current. A newer generation (here or in the runtime's own fence)
 * is `Superseded`: it owns the environment's apps, nothing is stopped.
 */
export async function stopFailedApps(
  deps: { runtime: Pick<AppTeardown, 'stopApps' | 'failedServices'> },
  input: StepInput,
) {
  const env = await loadCurrent(input);
  const target = runtimeTarget(env, input);
  const stopped = await deps.runtime.stopApps(target, 'the environment failed');
  // Its services stop with its apps (their data stays for a redeploy); one that failed itself says so.
  const services = env.serviceSpecs
    ? { services: serviceStates(env.serviceSpecs, 'stopped', await failedServices(deps.runtime, target)) }
    : {};
  if (Object.keys(stopped).length === 0) await transition(input, { urls: {}, ...services }, ['stoppedApps']);
  else await transition(input, { urls: {}, stoppedApps: stopped, ...services });
  return stopped;
}

/** The services the runtime says failed themselves, as `failed` states (none when it can't tell). */
async function failedServices(
  runtime: Pick<AppTeardown, 'failedServices'>,
  target: RuntimeTarget,
): Promise<Record<string, ServiceState['status']>> {
  try {
    const names = (await runtime.failedServices?.(target)) ?? [];
    return Object.fromEntries(names.map((n) => [n, 'failed' as const]));
  } catch (err) {
    log.warn('could not read which services failed', { error: (err as Error).name });
    return {};
  }
}

/** The apps a step acts on: the one of an app redeploy, or every app the preview config declares. */
export function appsInScope(env: Environment, input: StepInput): Record<string, AppSpec> {
  const specs = env.appSpecs ?? {};
  const names = input.app ? [input.app] : Object.keys(specs);
  const picked: Record<string, AppSpec> = {};
  for (const name of names) {
    const spec = specs[name];
    if (!spec) throw new DeployFailed(`app ${name} is not declared in the preview config`);
    picked[name] = spec;
  }
  return picked;
}

/**
 * How a step that acts on apps begins: the environment at this execution's generation (else
 * `Superseded`), the apps in scope checked (an app the preview config does not declare fails the step
 * before anything is written), then the step's status recorded. `withStopped`: an app redeploy also takes
 * the apps a failure stopped (`stoppedSiblings`).
 */
export async function beginAppStep(
  input: StepInput,
  status: Transition,
  opts: { withStopped?: boolean } = {},
): Promise<{ env: Environment; apps: Record<string, AppSpec>; target: RuntimeTarget }> {
  const env = await loadCurrent(input);
  const apps = appsInScope(env, input);
  if (opts.withStopped && input.app) Object.assign(apps, stoppedSiblings(env));
  await transition(input, status);
  return { env, apps, target: runtimeTarget(env, input) };
}

/** The apps a failure stopped (`stoppedApps`) that the preview config still declares, with their specs. */
export function stoppedSiblings(env: Environment): Record<string, AppSpec> {
  const picked: Record<string, AppSpec> = {};
  for (const name of Object.keys(env.stoppedApps ?? {})) {
    const spec = env.appSpecs?.[name];
    if (spec) picked[name] = spec;
  }
  return picked;
}

/** Who a runtime call acts for: the environment at this execution's generation. */
export const runtimeTarget = (env: Environment, input: StepInput): RuntimeTarget => ({
  orgId: env.orgId,
  envKey: env.envKey,
  repoFullName: env.repoFullName,
  prNumber: env.prNumber,
  generation: input.generation,
});

/** The message to show for a caught failure. Lambda wraps errors as JSON in `Cause`; local runs do not. */
export function failureMessage(failure: StepInput['failure']): string {
  const cause = failure?.Cause ?? '';
  if (failure?.Error === 'States.Timeout') return 'a pipeline step timed out';
  try {
    const parsed = JSON.parse(cause) as { errorMessage?: string };
    if (parsed.errorMessage) return parsed.errorMessage;
  } catch {
    // not JSON: the message itself
  }
  return cause || failure?.Error || 'unknown failure';
}
