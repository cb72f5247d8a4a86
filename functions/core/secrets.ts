import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BundleRef, SecretStore } from '../ports/secret-store/port.js';
import { newId } from '../shared/crypto.js';
import { ddb, isConditionFailure, table } from '../shared/dynamo.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { isReservedKey, RESERVED_KEY } from '../shared/validation.js';
import { getApplication } from './tenancy.js';

/** Secrets Manager's SecretString limit, which a bundle (a JSON object of env vars) must fit. */
export const MAX_BUNDLE_BYTES = 65_536;
/** How long a writer may hold a bundle; a crashed writer's lease expires after this. */
const LEASE_MS = 15_000;
/** How long a writer waits for a busy bundle before answering 409 (below API Gateway's 29 s). */
const WAIT_MS = 20_000;
const MASK_CAP = 32;

/** One key of a bundle as listed: never its value. */
export interface SecretSummary {
  key: string;
  maskedLength: number;
  updatedAt: string;
}

interface KeyMeta {
  maskedLength: number;
  updatedAt: string;
}

/**
 * Bundle metadata as stored (table `secretBundles`), served for listings instead of the values. `keys` is
 * absent until the first write commits: an item without it only ever held a lease. As read it is a plain
 * object of own members; it is written back as a `Map` (see the key rule in shared/validation.ts).
 */
interface BundleMeta {
  applicationId: string;
  app: string;
  keys?: Record<string, KeyMeta>;
  updatedAt?: string;
  lockToken?: string;
  lockExpiresAt?: number;
}

/** Characters of a value (code points, not UTF-16 units), capped. */
const maskedLength = (value: string) => Math.min([...value].length, MASK_CAP);

/** Key names and metadata of a bundle; an empty list when none exists yet. 404 for a foreign application. */
export async function listSecrets(orgId: string, ref: BundleRef): Promise<SecretSummary[]> {
  await getApplication(orgId, ref.applicationId);
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('secretBundles'), Key: { ...ref }, ConsistentRead: true }),
  );
  const keys = (Item as BundleMeta | undefined)?.keys ?? {};
  return Object.entries(keys)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, m]) => ({ key, maskedLength: m.maskedLength, updatedAt: m.updatedAt }));
}

/** Key metadata to commit: a `Map`, so any key name but `__proto__` is stored as data. */
type BundleKeys = Map<string, KeyMeta>;

/** The stored key metadata as a `Map` (own members only). */
const keysOf = (meta: BundleMeta): BundleKeys => new Map(Object.entries(meta.keys ?? {}));

/** 400 for a key no bundle may hold (the rule is in shared/validation.ts); handlers refuse it first. */
function refuseReservedKey(key: string): void {
  if (isReservedKey(key)) throw new ValidationError(`secret key must not be ${RESERVED_KEY}`);
}

/**
 * Run `fn` as the only writer of a bundle. Secrets Manager has no compare-and-set, so writers take a
 * lease on the bundle's metadata item (a conditional write: free, or expired) and retry with jittered
 * backoff while it is busy. `fn` gets the metadata as it was when the lease was taken and `commit`, which
 * stores new key metadata and releases the lease in one write fenced by the lease token. When `fn` ends
 * without committing (it threw), the lease is released on its own.
 *
 * A rejected request changes nothing: with `existing`, the lease is taken only on an item that exists
 * (404 `secret bundle not found` otherwise, and no item is created); a lease released without a commit
 * on an item that had never committed (no `keys`) deletes the item it created.
 */
async function withBundleLease<T>(
  ref: BundleRef,
  opts: { existing: boolean },
  fn: (meta: BundleMeta, commit: (keys: BundleKeys, now: string) => Promise<void>) => Promise<T>,
): Promise<T> {
  const token = newId();
  const giveUpAt = Date.now() + WAIT_MS;
  const free = '(attribute_not_exists(lockToken) OR lockExpiresAt < :now)';
  let meta: BundleMeta | undefined;
  for (let attempt = 0; !meta; attempt++) {
    const now = Date.now();
    try {
      const { Attributes } = await ddb().send(
        new UpdateCommand({
          TableName: table('secretBundles'),
          Key: { ...ref },
          UpdateExpression: 'SET lockToken = :t, lockExpiresAt = :exp',
          ConditionExpression: opts.existing ? `attribute_exists(applicationId) AND ${free}` : free,
          ExpressionAttributeValues: { ':t': token, ':exp': now + LEASE_MS, ':now': now },
          ReturnValues: 'ALL_NEW',
        }),
      );
      meta = Attributes as BundleMeta;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
      if (opts.existing) {
        // The condition failed: the item is absent (404) or its lease is busy (wait).
        const { Item } = await ddb().send(
          new GetCommand({ TableName: table('secretBundles'), Key: { ...ref }, ConsistentRead: true }),
        );
        if (!Item) throw new NotFoundError('secret bundle not found');
      }
      if (Date.now() > giveUpAt) throw new ConflictError('secret bundle is busy; retry');
      await sleep(Math.random() * Math.min(200, 10 * 2 ** attempt));
    }
  }
  const leased = meta;
  let released = false;
  const commit = async (keys: BundleKeys, now: string) => {
    await ddb().send(
      new UpdateCommand({
        TableName: table('secretBundles'),
        Key: { ...ref },
        UpdateExpression: 'SET #keys = :keys, updatedAt = :now REMOVE lockToken, lockExpiresAt',
        ConditionExpression: 'lockToken = :t',
        ExpressionAttributeNames: { '#keys': 'keys' },
        ExpressionAttributeValues: { ':keys': keys, ':now': now, ':t': token },
      }),
    );
    released = true;
  };
  try {
    return await fn(meta, commit);
  } finally {
    if (!released) {
      // While the lease is held nobody else commits, so `keys` is as it was when the lease was taken.
      const fence = {
        TableName: table('secretBundles'),
        Key: { ...ref },
        ConditionExpression: 'lockToken = :t',
        ExpressionAttributeValues: { ':t': token },
      };
      const release: Promise<unknown> =
        leased.keys === undefined
          ? ddb().send(new DeleteCommand(fence))
          : ddb().send(new UpdateCommand({ ...fence, UpdateExpression: 'REMOVE lockToken, lockExpiresAt' }));
      await release.catch((err) => {
        if (!isConditionFailure(err)) throw err;
      });
    }
  }
}

/**
 * Merge key/value pairs into a bundle (batch and single-key upsert). The first write creates the bundle;
 * keys not named are kept. Steps: 404 unless the org owns the application; take the bundle's lease;
 * read the values, merge, refuse (400, nothing written) a bundle over 64 KB; write the whole bundle;
 * record key metadata and release. Returns how many keys were merged.
 */
export async function upsertSecrets(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  items: { key: string; value: string }[],
): Promise<number> {
  for (const item of items) refuseReservedKey(item.key);
  await getApplication(orgId, ref.applicationId);
  const updates = new Map(items.map((i) => [i.key, i.value]));
  return withBundleLease(ref, { existing: false }, async (meta, commit) => {
    const merged = new Map(Object.entries((await store.read(ref)) ?? {}));
    for (const [key, value] of updates) merged.set(key, value);
    const values = Object.fromEntries(merged);
    const size = Buffer.byteLength(JSON.stringify(values), 'utf8');
    if (size > MAX_BUNDLE_BYTES) {
      throw new ValidationError(`secret bundle would be ${size} bytes; the limit is ${MAX_BUNDLE_BYTES}`);
    }
    await store.write(ref, values);
    const now = new Date().toISOString();
    const keys = keysOf(meta);
    for (const [key, value] of updates) keys.set(key, { maskedLength: maskedLength(value), updatedAt: now });
    await commit(keys, now);
    return updates.size;
  });
}

/**
 * Delete one key. Steps: 404 unless the org owns the application; take the lease of an existing bundle
 * (404 when there is none, and nothing is created); 404 when the bundle or the key does not exist; write
 * the bundle without it; record metadata and release.
 */
export async function deleteSecret(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  key: string,
): Promise<void> {
  refuseReservedKey(key);
  await getApplication(orgId, ref.applicationId);
  await withBundleLease(ref, { existing: true }, async (meta, commit) => {
    const stored = await store.read(ref);
    if (!stored) throw new NotFoundError('secret bundle not found');
    const values = new Map(Object.entries(stored));
    if (!values.delete(key)) throw new NotFoundError('secret key not found');
    await store.write(ref, Object.fromEntries(values));
    const keys = keysOf(meta);
    keys.delete(key);
    await commit(keys, new Date().toISOString());
  });
}
