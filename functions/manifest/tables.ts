/**
 * DynamoDB table definitions: the single source for the CDK stateful stack and for the tables the local
 * server creates in dynalite. Each table is shaped by its access patterns (README, "Data model").
 * Attribute names are short and generic only where an index is overloaded; otherwise they say what they hold.
 */
export type KeyType = 'S' | 'N';
export interface KeyDef {
  name: string;
  type: KeyType;
}
export interface IndexDef {
  name: string;
  partitionKey: KeyDef;
  sortKey?: KeyDef;
}
export interface TableDef {
  /** Env var through which functions learn the physical table name. */
  envVar: string;
  partitionKey: KeyDef;
  sortKey?: KeyDef;
  indexes: IndexDef[];
  /** Attribute holding an epoch-seconds expiry, if the table uses TTL. */
  ttlAttribute?: string;
}

const S = (name: string): KeyDef => ({ name, type: 'S' });
const N = (name: string): KeyDef => ({ name, type: 'N' });

export const tables = {
  /**
   * Organizations and their credentials: `ORG#id`, `APIKEY#keyId`, `CLIENT#clientId` (pk = sk kind); and
   * `REPO#owner/repo` (lower-cased): the organizations whose applications link a repository (`orgIds`, a
   * string set), which a GitHub webhook acts for.
   */
  tenancy: { envVar: 'TABLE_TENANCY', partitionKey: S('pk'), indexes: [] },
  /** Applications by id; `byRepo` finds the application an org linked to `owner/repo`. */
  applications: {
    envVar: 'TABLE_APPLICATIONS',
    partitionKey: S('applicationId'),
    indexes: [{ name: 'byRepo', partitionKey: S('repoKey'), sortKey: S('applicationId') }],
  },
  /** Environments keyed by (org, `owner/repo#pr`), lower-cased; `byStatus` finds in-flight work on restart. */
  environments: {
    envVar: 'TABLE_ENVIRONMENTS',
    partitionKey: S('orgId'),
    sortKey: S('envKey'),
    indexes: [{ name: 'byStatus', partitionKey: S('status'), sortKey: S('updatedAt') }],
  },
  /** Secret-bundle metadata (key names, lengths, times) and the per-bundle writer lease. Values live elsewhere. */
  secretBundles: {
    envVar: 'TABLE_SECRET_BUNDLES',
    partitionKey: S('applicationId'),
    sortKey: S('app'),
    indexes: [],
  },
  /** Recipe versions by setup: version 0 is the setup's header (owner org, latest version). */
  recipes: { envVar: 'TABLE_RECIPES', partitionKey: S('setupId'), sortKey: N('version'), indexes: [] },
  /**
   * Image builds in flight, by build id: the task token the build's completion ends, never given to the
   * build itself (CodeBuild events echo a build's environment). Items expire a day after the build starts.
   */
  builds: { envVar: 'TABLE_BUILDS', partitionKey: S('buildId'), indexes: [], ttlAttribute: 'expiresAt' },
  /**
   * GitHub webhook deliveries acted on, by `X-GitHub-Delivery` (a redelivery finds its id and changes
   * nothing). Items expire a week after receipt (GitHub offers redelivery for three days).
   */
  deliveries: {
    envVar: 'TABLE_DELIVERIES',
    partitionKey: S('deliveryId'),
    indexes: [],
    ttlAttribute: 'expiresAt',
  },
  /** Tests by id. */
  tests: { envVar: 'TABLE_TESTS', partitionKey: S('testId'), indexes: [] },
  /**
   * Runs by id, and newest first per org, per (org, test), per (org, folder) and per (org, status):
   * every index sorts on `createdKey` = `<created_at>#<id>`.
   */
  runs: {
    envVar: 'TABLE_RUNS',
    partitionKey: S('runId'),
    indexes: [
      { name: 'byOrg', partitionKey: S('orgId'), sortKey: S('createdKey') },
      { name: 'byTest', partitionKey: S('testKey'), sortKey: S('createdKey') },
      { name: 'byFolder', partitionKey: S('folderKey'), sortKey: S('createdKey') },
      { name: 'byStatus', partitionKey: S('statusKey'), sortKey: S('createdKey') },
    ],
  },
} as const satisfies Record<string, TableDef>;

export type TableName = keyof typeof tables;
export const tableNames = Object.keys(tables) as TableName[];

/**
 * Key builders: one function per key shape, used by the writer and every reader. No key is concatenated
 * anywhere else. Repository names are case-insensitive at the source host, so every key holds them
 * lower-cased (`repoKey`).
 */
export const keys = {
  tenancy: {
    org: (orgId: string) => `ORG#${orgId}`,
    apiKey: (keyId: string) => `APIKEY#${keyId}`,
    client: (clientId: string) => `CLIENT#${clientId}`,
    /** The organizations linking a repository (GitHub webhooks act for them). */
    repo: (repoFullName: string) => `REPO#${repoKey(repoFullName)}`,
  },
  deliveries: {
    /** A GitHub webhook delivery (its `X-GitHub-Delivery` GUID). */
    github: (deliveryId: string) => `github#${deliveryId.toLowerCase()}`,
  },
  applications: {
    /** `byRepo` partition: the org's applications linked to one repository. */
    byRepo: (orgId: string, repoFullName: string) => `${orgId}#${repoKey(repoFullName)}`,
  },
  environments: {
    /** Sort key of an environment: `owner/repo#pr`, lower-cased. */
    envKey: (repoFullName: string, prNumber: number) => `${repoKey(repoFullName)}#${prNumber}`,
    /** The parts of an `envKey` (the one place it is parsed). */
    parseEnvKey(envKey: string): { repo: string; prNumber: number } {
      const at = envKey.lastIndexOf('#');
      return { repo: envKey.slice(0, at), prNumber: Number(envKey.slice(at + 1)) };
    },
  },
  runs: {
    byTest: (orgId: string, testId: string) => `${orgId}#${testId}`,
    byFolder: (orgId: string, folderId: string) => `${orgId}#${folderId}`,
    byStatus: (orgId: string, status: string) => `${orgId}#${status}`,
    /** Sort key of every runs index: newest first when read backwards. */
    created: (createdAt: string, runId: string) => `${createdAt}#${runId}`,
  },
} as const;

/** Where source archives live in the artifacts store (the image-build role may read only this prefix). */
export const SOURCES_PREFIX = 'sources/';

/** Object keys in the artifacts store (an S3 bucket in AWS, files locally). */
export const artifactKeys = {
  /** The gzipped tarball of a repository at a commit: shared by every environment that builds it. */
  source: (orgId: string, repoFullName: string, sha: string) =>
    `${SOURCES_PREFIX}${orgId}/${repoKey(repoFullName)}/${sha.toLowerCase()}.tar.gz`,
};

/** Canonical storage form of a repository name: GitHub names are case-insensitive. */
export function repoKey(repoFullName: string): string {
  return repoFullName.toLowerCase();
}
