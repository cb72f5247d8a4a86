import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import { ddb, getOrgItem, isConditionFailure, queryItems, table } from '../../shared/aws/dynamo.js';
import { config } from '../../shared/config.js';
import { newId, randomSecret, sha256Hex } from '../../shared/crypto.js';
import { AlreadyExistsError, NotFoundError, ValidationError } from '../../shared/errors.js';
import { MAX_ALLOWED_ORIGINS, parseAllowedOrigin } from '../../shared/origins.js';
import { type AccessMode, type AccessSettings, effectiveAccess, effectiveSleepMinutes } from './access.js';
import {
  type PreviewRuleSettings,
  type PreviewRules,
  parsePreviewRuleSettings,
  previewRulesOf,
} from './preview-rules.js';

/** Credentials of a new organization. Shown once; only their hashes are stored. */
export interface OrgCredentials {
  orgId: string;
  apiKey: string;
  clientId: string;
  clientSecret: string;
}

/**
 * Create an organization with one API key (preview, secrets, recipes) and one client id/secret pair
 * (tests and runs).
 * Steps: put the org; put each credential under its own id with the SHA-256 of its secret.
 */
export async function createOrganization(name: string): Promise<OrgCredentials> {
  const orgId = newId();
  const keyId = newId();
  const keySecret = randomSecret();
  const clientId = `pvc_${newId()}`;
  const clientSecret = randomSecret();
  const createdAt = new Date().toISOString();
  const put = (Item: Record<string, unknown>) =>
    ddb().send(
      new PutCommand({ TableName: table('tenancy'), Item, ConditionExpression: 'attribute_not_exists(pk)' }),
    );
  await put({ pk: keys.tenancy.org(orgId), orgId, name, createdAt });
  await put({ pk: keys.tenancy.apiKey(keyId), orgId, secretHash: sha256Hex(keySecret), createdAt });
  await put({ pk: keys.tenancy.client(clientId), orgId, secretHash: sha256Hex(clientSecret), createdAt });
  return { orgId, apiKey: `pvk_${keyId}_${keySecret}`, clientId, clientSecret };
}

export async function organizationExists(orgId: string): Promise<boolean> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('tenancy'), Key: { pk: keys.tenancy.org(orgId) } }),
  );
  return Item !== undefined;
}

/**
 * An Application: a repository linked to an organization, with its source-host installation. Its access
 * settings (`access`, `sleepAfterMinutes`: core/applications/access.ts) and the rules of which pull requests
 * get a preview (core/applications/preview-rules.ts) are optional fields.
 */
export interface Application extends AccessSettings, PreviewRuleSettings {
  applicationId: string;
  orgId: string;
  name: string;
  /** `owner/repo`, absent for an unlinked application. */
  repoFullName?: string;
  /** `<orgId>#<owner/repo lower-cased>`, the `byRepo` index key; absent when unlinked. */
  repoKey?: string;
  disabled: boolean;
  /** Whether the source host has an active installation for it (a GitHub App installation). */
  installationActive: boolean;
  createdAt: string;
  /** Whether pull requests deploy while they are drafts (default false: they wait until ready for review). */
  deployDrafts?: boolean;
  /** Hours without a deploy after which a PR environment is torn down; 0 = never. @default 72 */
  ttlHours?: number;
  /** The Environment Factory of scenario runs (preview.yaml `factory` wins over these). */
  factoryApp?: string;
  factoryPath?: string;
  /**
   * Origins (`https://login.example.com`) a test run's browser may load besides the preview's own app
   * URLs: an identity provider, a CDN (run confinement; `parseAllowedOrigins`). @default none
   */
  allowedOrigins?: string[];
}

/**
 * An application's `allowedOrigins` as given (`previewctl apps update --allowed-origins`): each one an
 * http(s) origin that is not loopback, link-local or the service's own (`shared/origins.ts`), at most
 * `MAX_ALLOWED_ORIGINS`; normalized, sorted, without duplicates. A ValidationError names the first bad one.
 */
export function parseAllowedOrigins(origins: string[]): string[] {
  const out = new Set<string>();
  for (const text of origins) {
    if (!text.trim()) continue;
    const origin = parseAllowedOrigin(text);
    if (origin instanceof Error) throw new ValidationError(`allowedOrigins: ${origin.message}`);
    out.add(origin);
  }
  if (out.size > MAX_ALLOWED_ORIGINS)
    throw new ValidationError(`allowedOrigins: at most ${MAX_ALLOWED_ORIGINS} origins (${out.size} given)`);
  return [...out].sort();
}

/** The settings an application may change after it is created (`updateApplication`). */
export interface ApplicationSettings extends AccessSettings, PreviewRuleSettings {
  deployDrafts?: boolean;
  ttlHours?: number;
  disabled?: boolean;
  installationActive?: boolean;
  factoryApp?: string;
  factoryPath?: string;
  /** Replaces the list (`[]` empties it); validated by `parseAllowedOrigins`. */
  allowedOrigins?: string[];
}

/** Default `ttlHours` of an application. */
export const DEFAULT_TTL_HOURS = 72;
/** The longest `ttlHours` (a year). */
export const MAX_TTL_HOURS = 24 * 366;

/**
 * Create an application. A repository has at most one application per organization: a second answers
 * 409 (`AlreadyExistsError`) with the existing id, to be changed with `apps update` instead.
 */
export async function createApplication(input: {
  orgId: string;
  name?: string;
  repoFullName?: string;
  disabled?: boolean;
  installationActive?: boolean;
  deployDrafts?: boolean;
  ttlHours?: number;
}): Promise<Application> {
  // One application per repository in an organization: a second would have its secrets ignored.
  if (input.repoFullName) {
    const existing = await findApplicationByRepo(input.orgId, input.repoFullName);
    if (existing)
      throw new AlreadyExistsError(
        `${input.repoFullName} already has an application in this organization: ${existing.applicationId}`,
        existing.applicationId,
      );
  }
  const applicationId = newId();
  const app: Application = {
    applicationId,
    orgId: input.orgId,
    name: input.name ?? input.repoFullName ?? applicationId,
    repoFullName: input.repoFullName,
    repoKey: input.repoFullName ? keys.applications.byRepo(input.orgId, input.repoFullName) : undefined,
    disabled: input.disabled ?? false,
    installationActive: input.installationActive ?? true,
    createdAt: new Date().toISOString(),
    ...(input.deployDrafts !== undefined ? { deployDrafts: input.deployDrafts } : {}),
    ...(input.ttlHours !== undefined ? { ttlHours: input.ttlHours } : {}),
  };
  await ddb().send(
    new PutCommand({
      TableName: table('applications'),
      Item: app,
      ConditionExpression: 'attribute_not_exists(applicationId)',
    }),
  );
  if (app.repoFullName) await linkRepoToOrg(app.orgId, app.repoFullName);
  return app;
}

/**
 * Record that `orgId` links `repoFullName` (the tenancy item `REPO#owner/repo`, a set of org ids): what a
 * GitHub webhook, which names only the repository, finds the organizations to act for by. Idempotent.
 */
async function linkRepoToOrg(orgId: string, repoFullName: string): Promise<void> {
  await ddb().send(
    new UpdateCommand({
      TableName: table('tenancy'),
      Key: { pk: keys.tenancy.repo(repoFullName) },
      UpdateExpression: 'ADD orgIds :org',
      ExpressionAttributeValues: { ':org': new Set([orgId]) },
    }),
  );
}

/**
 * The organizations that have linked an application to `owner/repo` (case-insensitive), as recorded when
 * they linked it. A caller still checks each one's application: the set is never pruned.
 */
export async function orgsLinkingRepo(repoFullName: string): Promise<string[]> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('tenancy'), Key: { pk: keys.tenancy.repo(repoFullName) } }),
  );
  const orgIds = (Item as { orgIds?: Set<string> } | undefined)?.orgIds;
  return orgIds ? [...orgIds].sort() : [];
}

/**
 * Change an application's settings (`previewctl apps update`): 404 if absent or another org's. Also
 * records its repository link again (applications linked before links were recorded get theirs).
 */
export async function updateApplication(
  orgId: string,
  applicationId: string,
  settings: ApplicationSettings,
): Promise<Application> {
  if (settings.allowedOrigins !== undefined)
    settings = { ...settings, allowedOrigins: parseAllowedOrigins(settings.allowedOrigins) };
  settings = { ...settings, ...parsePreviewRuleSettings(settings) };
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':org': orgId };
  const sets: string[] = [];
  for (const [k, v] of Object.entries(settings)) {
    if (v === undefined) continue;
    names[`#${k}`] = k;
    values[`:${k}`] = v;
    sets.push(`#${k} = :${k}`);
  }
  let app: Application;
  try {
    const { Attributes } = await ddb().send(
      new UpdateCommand({
        TableName: table('applications'),
        Key: { applicationId },
        // With nothing to set, a no-op write still checks the owner and returns the item.
        UpdateExpression: sets.length ? `SET ${sets.join(', ')}` : 'SET orgId = :org',
        ConditionExpression: 'orgId = :org',
        ExpressionAttributeNames: sets.length ? names : undefined,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
    app = Attributes as Application;
  } catch (err) {
    if (isConditionFailure(err)) throw new NotFoundError('application not found');
    throw err;
  }
  if (app.repoFullName) await linkRepoToOrg(app.orgId, app.repoFullName);
  return app;
}

/** The application, if it exists and belongs to the org; otherwise 404 (never another org's data). */
export async function getApplication(orgId: string, applicationId: string): Promise<Application> {
  return getOrgItem<Application>('applications', { applicationId }, orgId, 'application');
}

/** The org's application linked to `owner/repo`, if any (oldest first when several are). */
export async function findApplicationByRepo(
  orgId: string,
  repoFullName: string,
): Promise<Application | undefined> {
  const { Items } = await ddb().send(
    new QueryCommand({
      TableName: table('applications'),
      IndexName: 'byRepo',
      KeyConditionExpression: 'repoKey = :k',
      ExpressionAttributeValues: { ':k': keys.applications.byRepo(orgId, repoFullName) },
    }),
  );
  const apps = (Items ?? []) as Application[];
  return apps.sort((a, b) => a.createdAt.localeCompare(b.createdAt))[0];
}

/** What GET /v1/preview/applications shows of an application (its preview rules with defaults filled in). */
export interface ApplicationView extends PreviewRules {
  applicationId: string;
  name: string;
  repoFullName: string | null;
  disabled: boolean;
  installationActive: boolean;
  ttlHours: number;
  deployDrafts: boolean;
  /** Origins a test run's browser may load besides the preview's app URLs (`apps update --allowed-origins`). */
  allowedOrigins: string[];
  createdAt: string;
  /**
   * Who may open its previews (core/applications/access.ts `effectiveAccess`: its setting or the mode's
   * default).
   */
  access: AccessMode;
  /** Idle minutes before a PR preview sleeps (0 = never; main-branch previews never sleep). */
  sleepAfterMinutes: number;
}

export const toApplicationView = (app: Application): ApplicationView => ({
  applicationId: app.applicationId,
  name: app.name,
  repoFullName: app.repoFullName ?? null,
  disabled: app.disabled,
  installationActive: app.installationActive,
  ttlHours: app.ttlHours ?? DEFAULT_TTL_HOURS,
  deployDrafts: app.deployDrafts ?? false,
  allowedOrigins: app.allowedOrigins ?? [],
  createdAt: app.createdAt,
  access: effectiveAccess(app, config().mode, config().eks.defaultAccess),
  sleepAfterMinutes: effectiveSleepMinutes(app, 1),
  ...previewRulesOf(app),
});

/**
 * The org's applications, oldest first (the `byOrg` index); with `repoFullName` only the one linking it
 * (the `byRepo` index).
 */
export async function listApplications(orgId: string, repoFullName?: string): Promise<ApplicationView[]> {
  if (repoFullName !== undefined) {
    const app = await findApplicationByRepo(orgId, repoFullName);
    return app ? [toApplicationView(app)] : [];
  }
  const out: ApplicationView[] = [];
  for await (const app of queryItems<Application>({
    TableName: table('applications'),
    IndexName: 'byOrg',
    KeyConditionExpression: 'orgId = :o',
    ExpressionAttributeValues: { ':o': orgId },
  }))
    out.push(toApplicationView(app));
  return out;
}
