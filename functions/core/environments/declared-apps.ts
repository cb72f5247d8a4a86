import { keys } from '../../manifest/tables.js';
import { queryItems, table } from '../../shared/aws/dynamo.js';
import { getApplication } from '../applications/index.js';

/**
 * The apps the environments of a repository declare: the union of the `apps` each recorded from its
 * `preview.yaml` (environments that never got that far record none). One Query of the organization's
 * partition, limited to the repository's `envKey`s and to the `apps` attribute.
 */
export async function declaredApps(orgId: string, repoFullName: string): Promise<string[]> {
  const names = new Set<string>();
  for await (const item of queryItems<{ apps?: string[] }>({
    TableName: table('environments'),
    KeyConditionExpression: 'orgId = :o AND begins_with(envKey, :repo)',
    ExpressionAttributeValues: { ':o': orgId, ':repo': keys.environments.repoPrefix(repoFullName) },
    ProjectionExpression: 'apps',
  }))
    for (const app of item.apps ?? []) names.add(app);
  return [...names].sort();
}

/**
 * The `warning` of a secret write (a misspelt app name): when environments of the application declare apps
 * and none declares `app` (a misspelt name), a sentence naming the apps they declare; else undefined
 * (also for an application not linked to a repository, or none of whose environments read its
 * `preview.yaml` yet: nothing to compare with). The secret is saved either way.
 */
export async function undeclaredAppWarning(
  orgId: string,
  applicationId: string,
  app: string,
): Promise<string | undefined> {
  const { repoFullName } = await getApplication(orgId, applicationId);
  if (repoFullName === undefined) return undefined;
  const declared = await declaredApps(orgId, repoFullName);
  if (declared.length === 0 || declared.includes(app)) return undefined;
  return `no environment of ${repoFullName} declares an app "${app}" (they declare ${declared.join(', ')})`;
}
