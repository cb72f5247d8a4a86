import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ddb, isConditionFailure, table } from '../shared/dynamo.js';
import { type Environment, type EnvironmentStatus, findEnvironment } from './environments.js';

/*
 * Error names the state machines act on (Step Functions matches `ErrorEquals` against the thrown error's
 * name): `Superseded` ends an execution quietly, `TransientError` is retried with backoff, anything else
 * is caught and recorded as `failed` with its message.
 */

/** A newer request owns the environment; this execution must change nothing. */
export class Superseded extends Error {
  override name = 'Superseded';
}
/** A fault worth retrying (throttling, a flaky network call). */
export class TransientError extends Error {
  override name = 'TransientError';
}
/** A permanent failure whose message is shown to callers as the environment's `error`. */
export class DeployFailed extends Error {
  override name = 'DeployFailed';
}

/** What every step receives: the environment and the generation the execution was started for. */
export interface StepInput {
  orgId: string;
  envKey: string;
  generation: number;
  app?: string;
  mode?: 'rebuild' | 'restart';
  /** Set by a Catch: `{ Error, Cause }` of the failed state. */
  failure?: { Error?: string; Cause?: string };
}

/** The environment, if this execution's generation is still the current one; otherwise `Superseded`. */
export async function loadCurrent(input: StepInput): Promise<Environment> {
  const env = await findEnvironment(input.orgId, input.envKey);
  if (!env || env.generation !== input.generation)
    throw new Superseded(`generation ${input.generation} superseded`);
  return env;
}

export interface Transition {
  status?: EnvironmentStatus;
  phase?: string;
  apps?: string[];
  urls?: Record<string, string>;
  lastDeployedSha?: string;
  error?: string;
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

/** The message to show for a caught failure. Lambda wraps errors as JSON in `Cause`; local runs do not. */
export function failureMessage(failure: StepInput['failure']): string {
  const cause = failure?.Cause ?? '';
  try {
    const parsed = JSON.parse(cause) as { errorMessage?: string };
    if (parsed.errorMessage) return parsed.errorMessage;
  } catch {
    // not JSON: the message itself
  }
  return cause || failure?.Error || 'unknown failure';
}
