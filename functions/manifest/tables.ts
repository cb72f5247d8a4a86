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
/**
 * What an index copies of each item besides the keys (the table's and its own): everything (`ALL`, the
 * default), nothing (`KEYS_ONLY`), or the named attributes (`INCLUDE`).
 */
export type Projection = 'ALL' | 'KEYS_ONLY' | { include: readonly string[] };
export interface IndexDef {
  name: string;
  partitionKey: KeyDef;
  sortKey?: KeyDef;
  /** @default 'ALL' */
  projection?: Projection;
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

/**
 * What a page of GET /run shows of a run (TestRun without its steps), carried by the runs' `page*`
 * indexes. Small: no steps, variables or scenario record (`scenarioState`, read by id for the few runs
 * with a `scenario`); `error` is at most 2,000 characters.
 */
export const RUN_LISTING = [
  'testId',
  'name',
  'status',
  'createdAt',
  'endedAt',
  'folder',
  'source',
  'applicationVersionId',
  'error',
  'videoKey',
  'scenario',
] as const;

/** A runs index: partitioned by `key`, sorted by `createdKey` (newest first when read backwards). */
const byCreated = (name: string, key: string, projection: Projection): IndexDef => ({
  name,
  partitionKey: S(key),
  sortKey: S('createdKey'),
  projection,
});

export const tables = {
  /**
   * Organizations and their credentials: `ORG#id`, `APIKEY#keyId`, `CLIENT#clientId` (pk = sk kind); and
   * `REPO#owner/repo` (lower-cased): the organizations whose applications link a repository (`orgIds`, a
   * string set), which a GitHub webhook acts for. The merge gate's small items by key (`keys.gates`, never
   * scanned: the one scan lists `ORG#` items only): `CHECK#org#envKey#sha`, a head commit's check run;
   * `PR#org#envKey`, the pull request's current head; `QUARANTINE#org#applicationId`, its quarantined tests.
   */
  tenancy: { envVar: 'TABLE_TENANCY', partitionKey: S('pk'), indexes: [] },
  /**
   * Applications by id; `byRepo` finds the application an org linked to `owner/repo`; `byOrg` lists an
   * org's applications, oldest first (GET /v1/preview/applications).
   */
  applications: {
    envVar: 'TABLE_APPLICATIONS',
    partitionKey: S('applicationId'),
    indexes: [
      { name: 'byRepo', partitionKey: S('repoKey'), sortKey: S('applicationId') },
      { name: 'byOrg', partitionKey: S('orgId'), sortKey: S('createdAt') },
    ],
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
  /** Tests by id; `byOrg` lists an org's tests, newest first when read backwards (GET /test). */
  tests: {
    envVar: 'TABLE_TESTS',
    partitionKey: S('testId'),
    indexes: [{ name: 'byOrg', partitionKey: S('orgId'), sortKey: S('createdAt') }],
  },
  /**
   * Each organization's request budget (core/applications/fair-share.ts): one counter per organization and
   * window (`RATE#org#window`), expired by TTL a window after it ends. Nothing else: small, write-heavy, no
   * index.
   */
  quotas: { envVar: 'TABLE_QUOTAS', partitionKey: S('pk'), indexes: [], ttlAttribute: 'expiresAt' },
  /**
   * Runs by id, and one index per filter GET /run allows, each partitioned by exactly the filtered set and
   * sorted by `createdKey` = `<created_at>#<id>` (newest first when read backwards): the org, (org, test),
   * (org, folder), (org, status), (org, test, status), (org, folder, status). A test never changes folder,
   * so (test, folder) is the test's partition or nothing. The indexes hold keys only (the org's also the
   * few attributes the PR comment reads): skipping `offset` runs reads keys. Beside each, a `page*` index on
   * the same keys carries what a listing shows of a run (`RUN_LISTING`, never its steps): a page is one
   * Query of it, from the last skipped key (docs/data-model.md).
   */
  runs: {
    envVar: 'TABLE_RUNS',
    partitionKey: S('runId'),
    indexes: [
      byCreated('listOrg', 'orgId', {
        include: ['testId', 'name', 'status', 'createdAt', 'applicationVersionId'],
      }),
      byCreated('listTest', 'testKey', 'KEYS_ONLY'),
      byCreated('listFolder', 'folderKey', 'KEYS_ONLY'),
      byCreated('listStatus', 'statusKey', 'KEYS_ONLY'),
      byCreated('listTestStatus', 'testStatusKey', 'KEYS_ONLY'),
      byCreated('listFolderStatus', 'folderStatusKey', 'KEYS_ONLY'),
      byCreated('pageOrg', 'orgId', { include: RUN_LISTING }),
      byCreated('pageTest', 'testKey', { include: ['orgId', ...RUN_LISTING] }),
      byCreated('pageFolder', 'folderKey', { include: ['orgId', ...RUN_LISTING] }),
      byCreated('pageStatus', 'statusKey', { include: ['orgId', ...RUN_LISTING] }),
      byCreated('pageTestStatus', 'testStatusKey', { include: ['orgId', ...RUN_LISTING] }),
      byCreated('pageFolderStatus', 'folderStatusKey', { include: ['orgId', ...RUN_LISTING] }),
      /**
       * Sparse (flaky runs): only a run that passed after a failed attempt has `flakyKey`, so this holds an
       * org's flaky runs and nothing else. Added, not a projection change of the indexes above (changing
       * an index's projection replaces it, and CloudFormation adds or drops one index per update): both
       * the listing and the page index of `flaky=true`, carrying what a page shows.
       */
      byCreated('listFlaky', 'flakyKey', { include: ['orgId', ...RUN_LISTING, 'flaky'] }),
      /**
       * Sparse (runs with healed steps): only a run that ended with a healed step has `healedKey`. Keys
       * only: the 100 projected attributes of the table's indexes have 11 left, fewer than a page needs,
       * so a page of `healed=true` reads its runs by id (docs/data-model.md).
       */
      byCreated('listHealed', 'healedKey', 'KEYS_ONLY'),
    ],
  },
} as const satisfies Record<string, TableDef>;

export type TableName = keyof typeof tables;
export const tableNames = Object.keys(tables) as TableName[];

/** Key builders of the runs table (see `keys`). */
const runKeys = {
  byTest: (orgId: string, testId: string) => `${orgId}#${testId}`,
  byFolder: (orgId: string, folderId: string) => `${orgId}#${folderId}`,
  byStatus: (orgId: string, status: string) => `${orgId}#${status}`,
  byTestStatus: (orgId: string, testId: string, status: string) => `${orgId}#${testId}#${status}`,
  byFolderStatus: (orgId: string, folderId: string, status: string) => `${orgId}#${folderId}#${status}`,
  /** `listFlaky` partition: the org's flaky runs (set on a run only when it ends flaky). */
  flaky: (orgId: string) => `${orgId}#flaky`,
  /** `listHealed` partition: the org's runs that ended with a healed step. */
  healed: (orgId: string) => `${orgId}#healed`,
  /** Sort key of every runs index: newest first when read backwards. */
  created: (createdAt: string, runId: string) => `${createdAt}#${runId}`,
  /** The index attributes that change with a run's status: every status write sets all three. */
  statusKeys(run: { orgId: string; testId: string; folderId: string; status: string }) {
    return {
      statusKey: runKeys.byStatus(run.orgId, run.status),
      testStatusKey: runKeys.byTestStatus(run.orgId, run.testId, run.status),
      folderStatusKey: runKeys.byFolderStatus(run.orgId, run.folderId, run.status),
    };
  },
  /** Every index attribute of a run: what a put writes, and what a backfill adds to an older item. */
  indexKeys(run: {
    orgId: string;
    runId: string;
    testId: string;
    folderId: string;
    status: string;
    createdAt: string;
  }): Record<
    'createdKey' | 'testKey' | 'folderKey' | 'statusKey' | 'testStatusKey' | 'folderStatusKey',
    string
  > {
    return {
      createdKey: runKeys.created(run.createdAt, run.runId),
      testKey: runKeys.byTest(run.orgId, run.testId),
      folderKey: runKeys.byFolder(run.orgId, run.folderId),
      ...runKeys.statusKeys(run),
    };
  },
};

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
  quotas: {
    /** An organization's request counter of one fixed window (its start, epoch seconds). */
    rate: (orgId: string, windowStart: number) => `RATE#${orgId}#${windowStart}`,
  },
  builds: {
    /** Where an app's latest image build logged (CloudWatch Logs group and stream), per environment. */
    latestLog: (orgId: string, envKey: string, app: string) => `log#${orgId}#${envKey}#${app}`,
    /** The image an environment's rebuild of an app pushed (its forced tag), kept for its later deploys. */
    rebuilt: (orgId: string, envKey: string, app: string) => `rebuilt#${orgId}#${envKey}#${app}`,
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
    /** What every `envKey` of a repository begins with (a Query of its environments). */
    repoPrefix: (repoFullName: string) => `${repoKey(repoFullName)}#`,
    /** The parts of an `envKey` (the one place it is parsed). */
    parseEnvKey(envKey: string): { repo: string; prNumber: number } {
      const at = envKey.lastIndexOf('#');
      return { repo: envKey.slice(0, at), prNumber: Number(envKey.slice(at + 1)) };
    },
  },
  runs: runKeys,
  /** The merge gate's items, in the tenancy table (core/gate/). */
  gates: {
    /** The check run of one head commit of an environment (`envKey` lower-cased already). */
    checkRun: (orgId: string, envKey: string, sha: string) => `CHECK#${orgId}#${envKey}#${sha.toLowerCase()}`,
    /** The pull request's current head, as the gate last saw it. */
    pullRequest: (orgId: string, envKey: string) => `PR#${orgId}#${envKey}`,
    /** An application's quarantined tests, one item (its map of test ids and a revision). */
    quarantine: (orgId: string, applicationId: string) => `QUARANTINE#${orgId}#${applicationId}`,
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
