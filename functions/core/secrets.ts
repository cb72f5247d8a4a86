import { setTimeout as sleep } from 'node:timers/promises';
import { BatchGetCommand, DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BundleRef, SecretStore } from '../ports/secret-store/port.js';
import { newId } from '../shared/crypto.js';
import { ddb, isConditionFailure, table } from '../shared/dynamo.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { isReservedKey, RESERVED_KEY } from '../shared/validation.js';
import { type Application, getApplication } from './tenancy.js';

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
  // The application (the tenancy check) and the bundle's metadata in one consistent BatchGetItem: one
  // round trip instead of two, for a route callers poll. Nothing of the bundle is used unless the
  // application is the caller's (404 as `getApplication` answers otherwise).
  const apps = table('applications');
  const bundles = table('secretBundles');
  let request: NonNullable<ConstructorParameters<typeof BatchGetCommand>[0]['RequestItems']> = {
    [apps]: { Keys: [{ applicationId: ref.applicationId }], ConsistentRead: true },
    [bundles]: { Keys: [{ applicationId: ref.applicationId, app: ref.app }], ConsistentRead: true },
  };
  let application: Application | undefined;
  let meta: BundleMeta | undefined;
  while (Object.keys(request).length) {
    const res = await ddb().send(new BatchGetCommand({ RequestItems: request }));
    application ??= res.Responses?.[apps]?.[0] as Application | undefined;
    meta ??= res.Responses?.[bundles]?.[0] as BundleMeta | undefined;
    request = res.UnprocessedKeys ?? {};
  }
  if (!application || application.orgId !== orgId) throw new NotFoundError('application not found');
  const keys = meta?.keys ?? {};
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

/** One change a request asks of a bundle: merge these key/value pairs, or delete this key. */
type Change = { upsert: Map<string, string> } | { remove: string };

/** A change waiting for its bundle's writer in this container, and how to answer its request. */
interface Pending {
  change: Change;
  /** When the request stops waiting for a bundle that stays busy (409). */
  giveUpAt: number;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Changes waiting, per store and bundle. An entry exists while a writer of this container works on the
 * bundle: a request that finds one joins its queue instead of competing for the lease (see `submit`).
 */
const waiting = new WeakMap<SecretStore, Map<string, Pending[]>>();

/**
 * Apply one change to a bundle and settle when it is stored (or refused). Writers to one bundle are
 * serialized by a lease on its metadata item (`takeLease`): Secrets Manager has no compare-and-set, so
 * the read-modify-write of a bundle's JSON must never run twice at once, in one container or across many.
 *
 * Within a container, changes to one bundle are coalesced: the first request becomes the bundle's writer;
 * requests arriving while it waits for or holds the lease queue behind it, and each time it holds the
 * lease it applies every change queued by then, in arrival order, with one read, one write and one
 * metadata commit (`applyBatch`). Each change is still judged on its own, as if applied alone in that
 * order: a refused one (a bundle over 64 KB, a key or bundle not found) is answered its 4xx and changes
 * nothing, the others are stored. In Lambda a container serves one request at a time, so a queue holds
 * one change and the lease alone serializes writers; locally (one process for every request) 100
 * concurrent upserts cost a few lease cycles instead of 100 competing ones.
 */
function submit(store: SecretStore, ref: BundleRef, change: Change): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const bundles = waiting.get(store) ?? new Map<string, Pending[]>();
    waiting.set(store, bundles);
    const id = `${ref.applicationId}\0${ref.app}`;
    const pending: Pending = { change, giveUpAt: Date.now() + WAIT_MS, resolve, reject };
    const queue = bundles.get(id);
    if (queue) {
      queue.push(pending);
      return;
    }
    const fresh = [pending];
    bundles.set(id, fresh);
    void writeWhilePending(store, ref, fresh, () => bundles.delete(id));
  });
}

/**
 * The bundle's writer in this container: lease cycles until no change is waiting, then `done` (in the
 * same turn as the last look at the queue, so no change can join a queue nobody drains). Never rejects.
 */
async function writeWhilePending(
  store: SecretStore,
  ref: BundleRef,
  queue: Pending[],
  done: () => void,
): Promise<void> {
  while (queue.length) {
    try {
      const lease = await takeLease(ref, queue);
      if (lease) await applyBatch(store, ref, lease, queue.splice(0));
    } catch (err) {
      // An unexpected failure (the database, the store): every change still waiting gets it.
      for (const p of queue.splice(0)) p.reject(err);
    }
  }
  done();
}

interface Lease {
  token: string;
}

/**
 * Take the bundle's lease for the changes in `queue`: a conditional write on its metadata item (free, or
 * its holder's lease expired), retried with jittered backoff while another container holds it. While only
 * deletions wait, the lease is taken only on an item that exists: when there is none, the deletions
 * queued before any upsert are answered 404 `secret bundle not found` and no item is created. A change
 * that has waited WAIT_MS is answered 409. Returns undefined when no change is left waiting.
 */
async function takeLease(ref: BundleRef, queue: Pending[]): Promise<Lease | undefined> {
  const token = newId();
  const free = '(attribute_not_exists(lockToken) OR lockExpiresAt < :now)';
  for (let attempt = 0; queue.length; attempt++) {
    const existing = queue.every((p) => 'remove' in p.change);
    const now = Date.now();
    const taken = await fenced(
      new UpdateCommand({
        TableName: table('secretBundles'),
        Key: { ...ref },
        UpdateExpression: 'SET lockToken = :t, lockExpiresAt = :exp',
        ConditionExpression: existing ? `attribute_exists(applicationId) AND ${free}` : free,
        ExpressionAttributeValues: { ':t': token, ':exp': now + LEASE_MS, ':now': now },
      }),
    );
    if (taken) return { token };
    if (existing) {
      // The condition failed: the item is absent (404) or its lease is busy (wait).
      const { Item } = await ddb().send(
        new GetCommand({ TableName: table('secretBundles'), Key: { ...ref }, ConsistentRead: true }),
      );
      if (!Item) {
        const first = queue.findIndex((p) => !('remove' in p.change));
        for (const p of queue.splice(0, first < 0 ? queue.length : first)) {
          p.reject(new NotFoundError('secret bundle not found'));
        }
        continue;
      }
    }
    const later = Date.now();
    for (let i = queue.length - 1; i >= 0; i--) {
      if (later > queue[i]!.giveUpAt)
        queue.splice(i, 1)[0]!.reject(new ConflictError('secret bundle is busy; retry'));
    }
    if (queue.length) await sleep(Math.random() * Math.min(200, 10 * 2 ** attempt));
  }
  return undefined;
}

/** Send a conditional write: false when its condition failed, other errors thrown. */
async function fenced(command: UpdateCommand | DeleteCommand): Promise<boolean> {
  try {
    await ddb().send(command as UpdateCommand);
    return true;
  } catch (err) {
    if (!isConditionFailure(err)) throw err;
    return false;
  }
}

/** Key metadata a batch changes: the new metadata of a key, or `null` for a deleted key. */
type Touched = Map<string, KeyMeta | null>;

/**
 * Apply the changes of a batch in order to a bundle's values, each judged on its own: a refused change
 * (the bundle or key to delete does not exist, a merge over 64 KB) gets its error and leaves the values
 * as they were. Returns the new values, the key metadata to change, and one outcome per change
 * (`undefined`: applied).
 */
function applyChanges(
  stored: Record<string, string> | undefined,
  batch: Pending[],
  now: string,
): { values: Map<string, string>; touched: Touched; outcomes: (Error | undefined)[] } {
  let values = new Map(Object.entries(stored ?? {}));
  let exists = stored !== undefined;
  const touched: Touched = new Map();
  const outcomes = batch.map(({ change }): Error | undefined => {
    if ('remove' in change) {
      if (!exists) return new NotFoundError('secret bundle not found');
      if (!values.delete(change.remove)) return new NotFoundError('secret key not found');
      touched.set(change.remove, null);
      return undefined;
    }
    const merged = new Map(values);
    for (const [key, value] of change.upsert) merged.set(key, value);
    const size = Buffer.byteLength(JSON.stringify(Object.fromEntries(merged)), 'utf8');
    if (size > MAX_BUNDLE_BYTES) {
      return new ValidationError(`secret bundle would be ${size} bytes; the limit is ${MAX_BUNDLE_BYTES}`);
    }
    values = merged;
    exists = true;
    for (const [key, value] of change.upsert) {
      touched.set(key, { maskedLength: maskedLength(value), updatedAt: now });
    }
    return undefined;
  });
  return { values, touched, outcomes };
}

/**
 * Under the lease: read the bundle's values, apply the changes of `batch` (`applyChanges`), write the
 * whole bundle once when any was applied, then commit the key metadata and release the lease in one
 * write (`commitKeys`). When nothing was applied, or a step failed, the lease is released without a
 * commit (`releaseLease`). Requests are answered once the lease is released.
 */
async function applyBatch(store: SecretStore, ref: BundleRef, lease: Lease, batch: Pending[]): Promise<void> {
  let outcomes: (Error | undefined)[] = [];
  let failure: { error: unknown } | undefined;
  let committed = false;
  try {
    const now = new Date().toISOString();
    const stored = await store.read(ref);
    const applied = applyChanges(stored, batch, now);
    outcomes = applied.outcomes;
    if (outcomes.some((o) => o === undefined)) {
      await store.write(ref, Object.fromEntries(applied.values));
      await commitKeys(ref, lease, applied.values, applied.touched, now, stored === undefined);
      committed = true;
    }
  } catch (error) {
    failure = { error };
  }
  if (!committed) await releaseLease(ref, lease).catch((error) => (failure ??= { error }));
  batch.forEach((p, i) => {
    const refused = outcomes[i];
    if (failure) p.reject(failure.error);
    else if (refused) p.reject(refused);
    else p.resolve();
  });
}

/** Most keys a commit names one by one (DynamoDB caps an update expression at 4 KB). */
const KEYS_PER_COMMIT = 100;

/**
 * Record the changed key metadata and release the lease, in one write fenced by the lease token. It
 * names only the changed keys (`SET keys.K = …`, `REMOVE keys.K`), so its cost does not grow with the
 * bundle; that needs the `keys` map to exist. The first commit of a bundle (`firstWrite`) stores the map
 * whole instead, and so does a batch that changes more keys than one expression may name (reading the
 * stored map first). `values` are the bundle's values as written. 409 when the lease was lost (it
 * expired and another writer took it).
 */
async function commitKeys(
  ref: BundleRef,
  lease: Lease,
  values: Map<string, string>,
  touched: Touched,
  now: string,
  firstWrite: boolean,
) {
  const base = { TableName: table('secretBundles'), Key: { ...ref } };
  const wholeMap = (keys: BundleKeys, condition: string) =>
    fenced(
      new UpdateCommand({
        ...base,
        UpdateExpression: 'SET #keys = :keys, updatedAt = :now REMOVE lockToken, lockExpiresAt',
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#keys': 'keys' },
        ExpressionAttributeValues: { ':keys': keys, ':now': now, ':t': lease.token },
      }),
    );
  const withChanges = (keys: BundleKeys) => {
    for (const [key, meta] of touched) {
      if (meta) keys.set(key, meta);
      else keys.delete(key);
    }
    return keys;
  };
  if (
    firstWrite &&
    (await wholeMap(withChanges(new Map()), 'lockToken = :t AND attribute_not_exists(#keys)'))
  )
    return;
  if (touched.size <= KEYS_PER_COMMIT) {
    const names: Record<string, string> = { '#keys': 'keys' };
    const values: Record<string, unknown> = { ':now': now, ':t': lease.token };
    const sets = ['updatedAt = :now'];
    const removes = ['lockToken', 'lockExpiresAt'];
    [...touched].forEach(([key, meta], i) => {
      names[`#k${i}`] = key;
      if (meta) {
        values[`:m${i}`] = meta;
        sets.push(`#keys.#k${i} = :m${i}`);
      } else removes.push(`#keys.#k${i}`);
    });
    const byKey = await fenced(
      new UpdateCommand({
        ...base,
        UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')}`,
        ConditionExpression: 'lockToken = :t AND attribute_exists(#keys)',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
    if (byKey) return;
  }
  // Many keys, or no map yet: the stored map with the changes. With no map, though values were stored
  // (a writer failed between the two), every key stored gets metadata, so the listing shows them all.
  const { Item } = await ddb().send(new GetCommand({ ...base, ConsistentRead: true }));
  const meta = Item as BundleMeta | undefined;
  const keys: BundleKeys = meta?.keys
    ? keysOf(meta)
    : new Map(
        [...values].map(([key, value]) => [key, { maskedLength: maskedLength(value), updatedAt: now }]),
      );
  if (meta?.lockToken !== lease.token || !(await wholeMap(withChanges(keys), 'lockToken = :t'))) {
    throw new ConflictError('secret bundle is busy; retry');
  }
}

/**
 * Release a lease without committing, fenced by its token (a lease taken over meanwhile is left alone).
 * An item that never committed (no `keys`: it only ever held a lease) is deleted, so a refused first
 * write leaves no row.
 */
async function releaseLease(ref: BundleRef, lease: Lease): Promise<void> {
  const base = {
    TableName: table('secretBundles'),
    Key: { ...ref },
    ExpressionAttributeValues: { ':t': lease.token },
  };
  const deleted = await fenced(
    new DeleteCommand({
      ...base,
      ConditionExpression: 'lockToken = :t AND attribute_not_exists(#keys)',
      ExpressionAttributeNames: { '#keys': 'keys' },
    }),
  );
  if (!deleted) {
    await fenced(
      new UpdateCommand({
        ...base,
        UpdateExpression: 'REMOVE lockToken, lockExpiresAt',
        ConditionExpression: 'lockToken = :t',
      }),
    );
  }
}

/**
 * Merge key/value pairs into a bundle (batch and single-key upsert). The first write creates the bundle;
 * keys not named are kept. Steps: 404 unless the org owns the application; then, as the bundle's only
 * writer (`submit`): read the values, merge, refuse (400, nothing written) a bundle over 64 KB; write the
 * whole bundle; record key metadata. Returns how many keys were merged.
 */
export async function upsertSecrets(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  items: { key: string; value: string }[],
): Promise<number> {
  for (const item of items) refuseReservedKey(item.key);
  await getApplication(orgId, ref.applicationId);
  const upsert = new Map(items.map((i) => [i.key, i.value]));
  await submit(store, ref, { upsert });
  return upsert.size;
}

/**
 * Delete one key. Steps: 404 unless the org owns the application; then, as the bundle's only writer
 * (`submit`, which creates no item for a bundle that does not exist): 404 when the bundle or the key does
 * not exist; write the bundle without it; record metadata.
 */
export async function deleteSecret(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  key: string,
): Promise<void> {
  refuseReservedKey(key);
  await getApplication(orgId, ref.applicationId);
  await submit(store, ref, { remove: key });
}
