import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import type { SecretStore } from '../../ports/secret-store/port.js';
import type { SourceHost } from '../../ports/source-host/port.js';
import type { Workflows } from '../../ports/workflows/port.js';
import { ddb, isConditionFailure, queryItems, table } from '../../shared/aws/dynamo.js';
import { config } from '../../shared/config.js';
import { newId } from '../../shared/crypto.js';
import { ConflictError, NotFoundError } from '../../shared/errors.js';
import {
  accessKey,
  accessUrls,
  effectiveAccess,
  findApplicationByRepo,
  getApplication,
} from '../applications/index.js';
import { breaksTie, ordered, type SourceOrder, StaleEvent } from './source-order.js';
import type { DeployInputs, Environment, EnvironmentStatus, EnvRef, PreviewStatus } from './types.js';

export { type SourceOrder, StaleEvent } from './source-order.js';
/** The record these requests read and write (types.ts), for callers that import it from here. */
export type { DeployInputs, Environment, EnvironmentStatus, EnvRef, PreviewStatus } from './types.js';

export const statusPath = (repoFullName: string, prNumber: number): string =>
  `/v1/preview/environments/${repoFullName}/${prNumber}`;

export function toPreviewStatus(env: Environment): PreviewStatus {
  return {
    repoFullName: env.repoFullName,
    prNumber: env.prNumber,
    status: env.status,
    ...(env.phase ? { phase: env.phase } : {}),
    createdAt: env.createdAt,
    updatedAt: env.updatedAt,
    ...(env.lastDeployedSha ? { lastDeployedSha: env.lastDeployedSha } : {}),
    urls: env.urls ?? {},
    ...(env.environmentId ? { environmentId: env.environmentId } : {}),
    ...(env.builds && Object.keys(env.builds).length ? { builds: env.builds } : {}),
    ...(env.status === 'failed' && env.error ? { error: env.error } : {}),
    ...(env.status === 'failed' && env.stoppedApps && Object.keys(env.stoppedApps).length
      ? { stoppedApps: env.stoppedApps }
      : {}),
    ...(env.inputs?.fork ? { fork: true as const } : {}),
    ...(env.asleepAt && env.phase === 'asleep' ? { asleepAt: env.asleepAt } : {}),
    ...(env.apps?.length ? { apps: [...env.apps] } : {}),
    ...(env.services && Object.keys(env.services).length && env.status !== 'torn_down'
      ? { services: servicesNow(env) }
      : {}),
  };
}

/** The services map as it stands: a sleeping environment's services sleep with it. */
function servicesNow(env: Environment): NonNullable<Environment['services']> {
  if (env.phase !== 'asleep') return env.services!;
  return Object.fromEntries(
    Object.entries(env.services!).map(([n, s]) => [
      n,
      { ...s, status: s.status === 'ready' ? 'asleep' : s.status },
    ]),
  );
}

export async function findEnvironment(orgId: string, envKey: string): Promise<Environment | undefined> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('environments'), Key: { orgId, envKey }, ConsistentRead: true }),
  );
  return Item as Environment | undefined;
}

async function getEnvironment(ref: EnvRef): Promise<Environment> {
  const env = await findEnvironment(ref.orgId, keys.environments.envKey(ref.repoFullName, ref.prNumber));
  if (!env) throw new NotFoundError('environment not found');
  return env;
}

/**
 * Status of an environment of the caller's organization (404 otherwise). With `secrets`, a protected
 * environment's status carries `accessUrls`, signed with its application's access key
 * (core/applications/access.ts).
 */
export async function environmentStatus(ref: EnvRef, secrets?: SecretStore): Promise<PreviewStatus> {
  const env = await getEnvironment(ref);
  const status = toPreviewStatus(env);
  if (!secrets) return status;
  const links = await environmentAccessUrls(env, status.urls, secrets);
  return links ? { ...status, accessUrls: links } : status;
}

/**
 * The signed links into a protected environment's apps (app → link; core/applications/access.ts
 * `accessUrls`), or undefined when it is public, has no URLs, or its application has no access key. The
 * status, the PR comment and the dashboard show these, never the key.
 */
export async function environmentAccessUrls(
  env: Pick<Environment, 'orgId' | 'envKey' | 'repoFullName' | 'access'>,
  urls: Record<string, string>,
  secrets: SecretStore,
): Promise<Record<string, string> | undefined> {
  // A deploy records the access its apps run with: a public environment has no links, and the status
  // poll reads no more than its own item (the application is looked up for a protected or older record).
  if (Object.keys(urls).length === 0 || env.access === 'public') return undefined;
  const app = await findApplicationByRepo(env.orgId, env.repoFullName);
  if (!app || (env.access ?? effectiveAccess(app, config().mode, config().eks.defaultAccess)) !== 'protected')
    return undefined;
  return accessUrls(await accessKey(secrets, app.applicationId), env, urls);
}

/** Execution name: unique, and readable in the Step Functions console. */
const executionName = (kind: string, env: Environment) =>
  `${kind}-${env.prNumber}-g${env.generation}-${newId()}`.slice(0, 80);

/**
 * Create or redeploy a whole environment at a new head (POST deploy, main-branch deploy, a PR event).
 * Steps: upsert the record as `pending` with the new inputs and a bumped generation (a torn-down
 * environment comes back), and with `order` only if it is newer than the last one recorded; if it is
 * not, and it is a same-second update whose head the source host confirms as the pull request's head
 * now (source-order.ts `breaksTie`), upsert again on the condition that the same key and another head are
 * still recorded; otherwise `StaleEvent`, nothing written. Start the deploy state machine for that
 * generation.
 */
export async function requestDeploy(
  workflows: Workflows,
  ref: EnvRef,
  inputs: DeployInputs,
  opts: SourceOrder = {},
): Promise<Environment> {
  const envKey = keys.environments.envKey(ref.repoFullName, ref.prNumber);
  const upsert = async (tieHead?: string) => {
    const now = new Date().toISOString();
    const { set, values, ...condition } = ordered(opts.order, undefined, tieHead);
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: ref.orgId, envKey },
        UpdateExpression:
          'SET repoFullName = :repo, prNumber = :pr, #status = :pending, phase = :queued, inputs = :inputs, ' +
          'updatedAt = :now, lastDeployAt = :now, createdAt = if_not_exists(createdAt, :now), ' +
          'urls = if_not_exists(urls, :empty), environmentId = if_not_exists(environmentId, :environmentId)' +
          `${set} ADD generation :one REMOVE #error, tornDownRequested, teardownReason`,
        ...condition,
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
        ExpressionAttributeValues: {
          ':repo': ref.repoFullName,
          ':pr': ref.prNumber,
          ':pending': 'pending',
          ':queued': 'queued',
          ':inputs': inputs,
          ':now': now,
          ':empty': {},
          ':one': 1,
          ':environmentId': newId(),
          ...values,
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return Attributes as Environment;
  };
  let env: Environment;
  try {
    env = await upsert();
  } catch (err) {
    if (opts.order === undefined || !isConditionFailure(err)) throw err;
    // Not newer than what was recorded: stale, unless a same-second update with the newer head.
    const recorded = await findEnvironment(ref.orgId, envKey);
    if (!opts.head || !(await breaksTie(recorded, { order: opts.order, head: opts.head })))
      throw new StaleEvent();
    try {
      env = await upsert(opts.head.sha);
    } catch (again) {
      // Something else landed since it was read (a later event, a copy of this one): it wins.
      if (isConditionFailure(again)) throw new StaleEvent();
      throw again;
    }
  }
  await workflows.start(
    'deploy',
    { orgId: env.orgId, envKey: env.envKey, generation: env.generation },
    executionName('deploy', env),
  );
  return env;
}

/**
 * Deploy a pull request's head (POST deploy).
 * Steps: the caller's organization must have an application linked to the repository: otherwise 404
 * naming it, with nothing stored and nothing started (an organization deploys, and so runs, only its own
 * repositories, and cannot probe which others the source host reaches); 409 if that application is
 * disabled; then `requestDeploy` under the repository name as the application links it, whatever case
 * the caller wrote (GitHub names are case-insensitive: one canonical form from request to source host).
 */
export async function requestPrDeploy(
  workflows: Workflows,
  orgId: string,
  repoFullName: string,
  prNumber: number,
  inputs: DeployInputs,
  opts: SourceOrder = {},
): Promise<Environment> {
  const app = await findApplicationByRepo(orgId, repoFullName);
  if (!app?.repoFullName)
    throw new NotFoundError(
      `repository ${repoFullName} is not linked to an application of this organization`,
    );
  if (app.disabled) throw new ConflictError('application is disabled');
  return requestDeploy(workflows, { orgId, repoFullName: app.repoFullName, prNumber }, inputs, opts);
}

/**
 * Tear an environment down. Nothing happens for an environment that does not exist in the org (the
 * caller still gets 202), nor, with `order`, for a stale source event (`SourceOrder`). Steps: mark the
 * teardown requested with a bumped generation (so in-flight work of older generations stops) and its
 * `reason` when given (the PR comment shows it), start the teardown state machine. Says what it did.
 */
export async function requestTeardown(
  workflows: Workflows,
  ref: EnvRef,
  opts: SourceOrder & { reason?: string } = {},
): Promise<'requested' | 'absent' | 'stale'> {
  const { set, values, ...condition } = ordered(opts.order, 'attribute_exists(envKey)');
  const why = opts.reason === undefined ? ' REMOVE teardownReason' : '';
  let env: Environment;
  try {
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: ref.orgId, envKey: keys.environments.envKey(ref.repoFullName, ref.prNumber) },
        UpdateExpression:
          `SET tornDownRequested = :t, phase = :phase, updatedAt = :now${set}` +
          `${opts.reason === undefined ? '' : ', teardownReason = :reason'} ADD generation :one${why}`,
        ...condition,
        ExpressionAttributeValues: {
          ...(opts.reason === undefined ? {} : { ':reason': opts.reason }),
          ':t': true,
          ':phase': 'tearing-down',
          ':now': new Date().toISOString(),
          ':one': 1,
          ...values,
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    env = Attributes as Environment;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    if (opts.order === undefined) return 'absent';
    const current = await findEnvironment(
      ref.orgId,
      keys.environments.envKey(ref.repoFullName, ref.prNumber),
    );
    return current ? 'stale' : 'absent';
  }
  await workflows.start(
    'teardown',
    { orgId: env.orgId, envKey: env.envKey, generation: env.generation },
    executionName('teardown', env),
  );
  return 'requested';
}

function assertRedeployable(env: Environment): asserts env is Environment & { inputs: DeployInputs } {
  if (env.status === 'torn_down' || env.tornDownRequested)
    throw new ConflictError('environment was torn down');
  if (!env.inputs) throw new ConflictError('environment predates redeploy support');
}

/**
 * Re-run the whole pipeline at the environment's current head SHA (PATCH).
 * Steps: 404 if absent; 409 if torn down or without stored inputs; bump the generation on the condition
 * that nothing changed that (a teardown racing in); start the deploy state machine.
 */
export async function requestRedeploy(workflows: Workflows, ref: EnvRef): Promise<void> {
  const current = await getEnvironment(ref);
  assertRedeployable(current);
  let env: Environment;
  try {
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: current.orgId, envKey: current.envKey },
        UpdateExpression:
          'SET #status = :pending, phase = :queued, updatedAt = :now, lastDeployAt = :now ' +
          'ADD generation :one REMOVE #error',
        ConditionExpression: 'generation = :g',
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
        ExpressionAttributeValues: {
          ':pending': 'pending',
          ':queued': 'queued',
          ':now': new Date().toISOString(),
          ':one': 1,
          ':g': current.generation,
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    env = Attributes as Environment;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    // Something newer landed meanwhile: judge again against it.
    return requestRedeploy(workflows, ref);
  }
  await workflows.start(
    'deploy',
    { orgId: env.orgId, envKey: env.envKey, generation: env.generation },
    executionName('redeploy', env),
  );
}

export type AppRedeployMode = 'rebuild' | 'restart';

/**
 * Claim a settled environment (ready or failed) for work that runs under its current generation (an app
 * redeploy, a restart after the local server restarted): a conditional write from `ready`/`failed` to
 * `pending`, so two such requests cannot interleave. A whole-environment request or a teardown still
 * supersedes it (they bump the generation). Returns the claimed record, or why it could not be claimed.
 */
async function claimSettled(
  env: Environment,
  phase: string,
): Promise<{ claimed: Environment } | { refused: 'busy' | 'changed' }> {
  try {
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: env.orgId, envKey: env.envKey },
        UpdateExpression: 'SET #status = :pending, phase = :phase, updatedAt = :now REMOVE #error',
        ConditionExpression:
          'generation = :g AND #status IN (:ready, :failed) AND attribute_not_exists(tornDownRequested)',
        ExpressionAttributeNames: { '#status': 'status', '#error': 'error' },
        ExpressionAttributeValues: {
          ':pending': 'pending',
          ':phase': phase,
          ':now': new Date().toISOString(),
          ':g': env.generation,
          ':ready': 'ready',
          ':failed': 'failed',
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    return { claimed: Attributes as Environment };
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    const now = await findEnvironment(env.orgId, env.envKey);
    return {
      refused: now && now.generation === env.generation && !now.tornDownRequested ? 'busy' : 'changed',
    };
  }
}

/**
 * Redeploy one app (PATCH …/apps/{app}); siblings are untouched. It runs under the environment's current
 * generation: a newer whole-environment request or a teardown supersedes it.
 * Steps: 404 if the environment is absent; 409 if torn down or without inputs; 404 if the preview config
 * declares no such app; claim the environment (409 while another deploy of it is in progress); start the
 * app-redeploy state machine.
 */
export async function requestAppRedeploy(
  workflows: Workflows,
  ref: EnvRef,
  app: string,
  mode: AppRedeployMode,
): Promise<void> {
  const env = await getEnvironment(ref);
  assertRedeployable(env);
  if (!env.apps?.includes(app)) throw new NotFoundError('app not found');
  const claim = await claimSettled(env, 'queued');
  if ('refused' in claim) {
    if (claim.refused === 'changed') return requestAppRedeploy(workflows, ref, app, mode);
    throw new ConflictError('a deploy of this environment is in progress; retry once it is ready or failed');
  }
  const claimed = claim.claimed;
  await workflows.start(
    'redeployApp',
    { orgId: claimed.orgId, envKey: claimed.envKey, generation: claimed.generation, app, mode },
    executionName(`app-${app}`, claimed),
  );
}

/** Every status but torn_down: in-flight work, ready environments, and failed ones a teardown may wait on. */
const LIVE_STATUSES: EnvironmentStatus[] = ['pending', 'building', 'deploying', 'ready', 'failed'];

/** Every environment not torn down, of every organization, through the `byStatus` index. */
export async function* liveEnvironments(): AsyncGenerator<Environment> {
  for (const status of LIVE_STATUSES)
    yield* queryItems<Environment>({
      TableName: table('environments'),
      IndexName: 'byStatus',
      KeyConditionExpression: '#status = :s',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':s': status },
    });
}

export type Resumption = 'resumed-deploy' | 'resumed-teardown' | 'restarted' | 'unchanged';

/**
 * Bring one environment back to a true state after the runtime that ran it restarted (the local server
 * after a stop or a crash; in AWS, Step Functions executions outlive any one process and this is not
 * needed). In-flight work is started again at the same generation (its steps are idempotent and fenced);
 * a ready environment restarts every app from its existing builds (ending `failed` with the reason when
 * it cannot); failed and torn-down environments stay as they are.
 */
export async function resumeEnvironment(workflows: Workflows, env: Environment): Promise<Resumption> {
  const input = { orgId: env.orgId, envKey: env.envKey, generation: env.generation };
  if (env.tornDownRequested) {
    if (env.status === 'torn_down') return 'unchanged';
    await workflows.start('teardown', input, executionName('resume-teardown', env));
    return 'resumed-teardown';
  }
  if (env.status === 'pending' || env.status === 'building' || env.status === 'deploying') {
    await workflows.start('deploy', input, executionName('resume-deploy', env));
    return 'resumed-deploy';
  }
  if (env.status === 'ready') {
    const claim = await claimSettled(env, 'restarting');
    if ('refused' in claim) return 'unchanged';
    await workflows.start(
      'redeployApp',
      { ...input, mode: 'restart' },
      executionName('resume-restart', claim.claimed),
    );
    return 'restarted';
  }
  return 'unchanged';
}

/** What the main-branch deploy answers. */
export interface MainBranchDeploy {
  applicationId: string;
  repoFullName: string;
  branch: string;
  headSha: string;
  prNumber: 0;
  /** The environment's CUID (a run's application_version_id). */
  environmentId?: string;
}

/**
 * Deploy an Application's linked repository main branch as environment 0.
 * Steps: load the application (404 if absent or another org's); 409 if disabled, unlinked or switched
 * off (`installationActive`, a stored switch); resolve `main` at the source host: 409 when no installation
 * of the source host (the GitHub App) covers the repository, 404 if the repository or the branch is
 * missing; then the same as a PR deploy.
 */
export async function requestMainBranchDeploy(
  deps: { workflows: Workflows; sourceHost: SourceHost },
  orgId: string,
  applicationId: string,
  /** The branch to deploy (a push to the default branch names it). */
  branch = 'main',
): Promise<MainBranchDeploy> {
  const app = await getApplication(orgId, applicationId);
  if (app.disabled) throw new ConflictError('application is disabled');
  if (!app.repoFullName) throw new ConflictError('application is not linked to a repository');
  if (!app.installationActive) throw new ConflictError('application has no active installation');
  const ref = await deps.sourceHost.resolveBranch(app.repoFullName, branch);
  if (ref.kind === 'repository-not-found') throw new NotFoundError('linked repository not found');
  if (ref.kind === 'ref-not-found') throw new NotFoundError(`${branch} branch ref not found`);
  if (ref.kind === 'no-installation')
    throw new ConflictError(
      `application has no active installation for ${app.repoFullName} on the source host`,
    );
  const env = await requestDeploy(
    deps.workflows,
    { orgId, repoFullName: app.repoFullName, prNumber: 0 },
    {
      headSha: ref.sha,
      headRef: branch,
    },
  );
  return {
    applicationId,
    repoFullName: app.repoFullName,
    branch,
    headSha: ref.sha,
    prNumber: 0,
    environmentId: env.environmentId,
  };
}

/**
 * Every environment of an organization (`previewctl envs list`), torn-down ones included: a query of the
 * table's partition (`orgId`), paged to the end.
 */
export async function listEnvironments(orgId: string): Promise<PreviewStatus[]> {
  const out: PreviewStatus[] = [];
  for await (const item of queryItems<Environment>({
    TableName: table('environments'),
    KeyConditionExpression: 'orgId = :o',
    ExpressionAttributeValues: { ':o': orgId },
  }))
    out.push(toPreviewStatus(item));
  return out;
}

/**
 * Record that a runtime put a ready environment to sleep (`asleepAt`: phase `asleep` and the time) or woke
 * it (undefined: both removed). Only a `ready` environment with no other phase (a teardown's,
 * a deploy's) is changed; otherwise nothing is written. The status stays `ready`.
 */
export async function recordAsleep(
  ref: { orgId: string; envKey: string },
  asleepAt: string | undefined,
): Promise<void> {
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('environments'),
        Key: { orgId: ref.orgId, envKey: ref.envKey },
        UpdateExpression: asleepAt ? 'SET #p = :asleep, asleepAt = :at' : 'REMOVE #p, asleepAt',
        ConditionExpression: asleepAt
          ? '#s = :ready AND attribute_not_exists(#p)'
          : '#s = :ready AND #p = :asleep',
        ExpressionAttributeNames: { '#p': 'phase', '#s': 'status' },
        ExpressionAttributeValues: {
          ':ready': 'ready',
          ':asleep': 'asleep',
          ...(asleepAt ? { ':at': asleepAt } : {}),
        },
      }),
    );
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
  }
}
