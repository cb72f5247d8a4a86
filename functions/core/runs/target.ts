import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { keys, repoKey } from '../../manifest/tables.js';
import { ddb, queryItems, table } from '../../shared/aws/dynamo.js';
import { config } from '../../shared/config.js';
import { runOrigins } from '../../shared/origins.js';
import { type AccessSettings, effectiveAccess } from '../applications/index.js';
import type { Environment } from '../environments/index.js';
import { runEnvironmentOf } from './environment.js';
import type { RunItem, RunTarget } from './store.js';

/*
 * Where a run goes: the environment and app its test names, resolved by Prepare
 * into a `RunTarget` (first page, app URLs, the origins its browser may load, the Environment Factory).
 * For users: docs/reference/tests-and-runs.md, "What a run runs against".
 */

/** The app URL plus a path, as written (`/form` → `http://host:port/form`). */
export function joinAppUrl(appUrl: string, path: string): string {
  if (!path) return appUrl;
  return `${appUrl.replace(/\/+$/, '')}${path.startsWith('/') ? '' : '/'}${path}`;
}

/** The org's environment of `repoFullName` whose `environmentId` is `environmentId`, if any. */
async function findEnvironmentById(
  orgId: string,
  repoFullName: string,
  environmentId: string,
): Promise<Environment | undefined> {
  for await (const env of queryItems<Environment>({
    TableName: table('environments'),
    KeyConditionExpression: 'orgId = :org',
    FilterExpression: 'environmentId = :id',
    ExpressionAttributeValues: { ':org': orgId, ':id': environmentId },
    ConsistentRead: true,
  }))
    if (repoKey(env.repoFullName) === repoKey(repoFullName)) return env;
  return undefined;
}

/**
 * Resolve what a run runs against: the test's application; the environment the
 * run's `application_version_id` names (an `environmentId` of that application), or else the
 * application's main-branch environment (0); it must be `ready`; the app named by
 * `application_version.name` in its `urls`, plus `application_version.path`. Otherwise the error says
 * which of these is missing.
 */
export async function resolveTarget(run: RunItem): Promise<{ target: RunTarget } | { error: string }> {
  const applicationId = run.applicationId;
  if (!applicationId)
    return {
      error:
        'the test has no application: set application_id in the tests file, or import it with ' +
        '`previewctl tests import --app ID`',
    };
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('applications'), Key: { applicationId }, ConsistentRead: true }),
  );
  const app = Item as
    | ({
        orgId: string;
        repoFullName?: string;
        disabled?: boolean;
        factoryApp?: string;
        factoryPath?: string;
        allowedOrigins?: string[];
      } & AccessSettings)
    | undefined;
  if (!app || app.orgId !== run.orgId) return { error: `application ${applicationId} not found` };
  if (!app.repoFullName)
    return { error: `application ${applicationId} is not linked to a repository, so it has no environments` };
  let env: Environment | undefined;
  let label: string;
  if (run.applicationVersionId !== undefined) {
    label = `environment ${run.applicationVersionId}`;
    env = await findEnvironmentById(run.orgId, app.repoFullName, run.applicationVersionId);
    if (!env) return { error: `no environment ${run.applicationVersionId} of application ${applicationId}` };
  } else {
    label = `the main-branch environment (0) of application ${applicationId}`;
    const { Item: envItem } = await ddb().send(
      new GetCommand({
        TableName: table('environments'),
        Key: { orgId: run.orgId, envKey: keys.environments.envKey(app.repoFullName, 0) },
        ConsistentRead: true,
      }),
    );
    env = envItem as Environment | undefined;
    if (!env || env.status === 'torn_down')
      return {
        error:
          `application ${applicationId} has no main-branch environment (0): deploy it, or name an ` +
          'environment with application_version_id',
      };
  }
  if (env.status !== 'ready' || env.tornDownRequested)
    return {
      error: `${label} is not ready (status ${env.tornDownRequested ? 'tearing down' : env.status})`,
    };
  const appName = run.applicationVersion?.name ?? '';
  const appUrl = env.urls?.[appName];
  if (!appUrl) {
    const apps = Object.keys(env.urls ?? {}).sort();
    return {
      error: `${label} has no app "${appName}" (its apps: ${apps.length ? apps.join(', ') : 'none'})`,
    };
  }
  return {
    target: {
      url: joinAppUrl(appUrl, run.applicationVersion?.path ?? ''),
      appUrl,
      applicationId,
      ...(env.environmentId ? { environmentId: env.environmentId } : {}),
      environment: runEnvironmentOf(env),
      apps: Object.keys(env.urls ?? {}).sort(),
      urls: { ...env.urls },
      origins: runOrigins(Object.values(env.urls ?? {}), app.allowedOrigins ?? []),
      envKey: env.envKey,
      access: effectiveAccess(app, config().mode, config().eks.defaultAccess),
      ...(env.factory
        ? { factory: env.factory }
        : app.factoryApp
          ? { factory: { app: app.factoryApp, path: app.factoryPath ?? '/' } }
          : {}),
    },
  };
}
