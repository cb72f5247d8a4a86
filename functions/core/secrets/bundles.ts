import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { newId } from '../../shared/crypto.js';
import { ConflictError, NotFoundError, ValidationError } from '../../shared/errors.js';
import { isReservedKey, RESERVED_KEY } from '../../shared/validation.js';
import { getApplication } from '../applications/index.js';

/** Secrets Manager's SecretString limit, which a bundle (a JSON object of env vars) must fit. */
export const MAX_BUNDLE_BYTES = 65_536;
/**
 * The bundle lease's timing (module state so that tests can shorten it):
 * - `leaseMs`: how long a writer may hold a bundle; a crashed writer's lease expires after this. Longer
 *   than an API function may run (28 s, lib/cdk/api-function.ts), so no writer outlives its lease in AWS;
 * - `waitMs`: how long a writer waits for a busy bundle before answering 409 (below API Gateway's 29 s);
 * - `writeBudgetMs`: the least lease time left for a writer to start writing the bundle. A writer whose
 *   read was slow writes nothing (409): its lease may run out mid-write, another writer take the bundle
 *   and commit, and this write land over it (a lost key).
 */
export const leaseTiming = { leaseMs: 30_000, waitMs: 20_000, writeBudgetMs: 5_000 };
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
  /** The application's organization, recorded by the first lease taken (the lease's tenancy check). */
  orgId?: string;
  keys?: Record<string, KeyMeta>;
  updatedAt?: string;
  /** The token of the lease last taken; kept when it is released (see `Lease.before`). */
  lockToken?: string;
  /** Until when the lease is held: 0 once released (absent on items of older writers). */
  lockExpiresAt?: number;
}

/** Characters of a value (code points, not UTF-16 units), capped. */
const maskedLength = (value: string) => Math.min([...value].length, MASK_CAP);

/** Key names and metadata of a bundle; an empty list when none exists yet. 404 for a foreign application. */
export async function listSecrets(orgId: string, ref: BundleRef): Promise<SecretSummary[]> {
  // One consistent read for a route callers poll: the bundle's metadata item records the organization of
  // its application (`orgId`, set by the first lease, which checked it; an application never changes
  // organization), so it is its own tenancy check. Only without a recorded organization (no bundle yet,
  // or one written before items recorded it) is the application read: 404 unless it is the caller's.
  const { Item } = await ddb().send(
    new GetCommand({
      TableName: table('secretBundles'),
      Key: { applicationId: ref.applicationId, app: ref.app },
      ConsistentRead: true,
      ProjectionExpression: '#keys, orgId',
      ExpressionAttributeNames: { '#keys': 'keys' },
    }),
  );
  const meta = Item as Pick<BundleMeta, 'keys' | 'orgId'> | undefined;
  if (meta?.orgId === undefined) await getApplication(orgId, ref.applicationId);
  else if (meta.orgId !== orgId) throw new NotFoundError('application not found');
  return Object.entries(meta?.keys ?? {})
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
 * Changes waiting, per store, organization and bundle. An entry exists while a writer of this container
 * works on the bundle for that organization: a request that finds one joins its queue instead of
 * competing for the lease (see `submit`). The organization is part of the key because the lease is also
 * the tenancy check (`takeLease`): a queue holds only changes of callers who pass the same check.
 */
const waiting = new WeakMap<SecretStore, Map<string, Pending[]>>();

/**
 * Apply one change to a bundle for `orgId` and settle when it is stored (or refused). Writers to one
 * bundle are serialized by a lease on its metadata item (`takeLease`): Secrets Manager has no
 * compare-and-set, so the read-modify-write of a bundle's JSON must never run twice at once, in one
 * container or across many.
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
function submit(store: SecretStore, orgId: string, ref: BundleRef, change: Change): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const bundles = waiting.get(store) ?? new Map<string, Pending[]>();
    waiting.set(store, bundles);
    const id = `${orgId}\0${ref.applicationId}\0${ref.app}`;
    const pending: Pending = { change, giveUpAt: Date.now() + leaseTiming.waitMs, resolve, reject };
    const queue = bundles.get(id);
    if (queue) {
      queue.push(pending);
      return;
    }
    const fresh = [pending];
    bundles.set(id, fresh);
    void writeWhilePending(store, orgId, ref, fresh, () => bundles.delete(id));
  });
}

/**
 * The bundle's writer in this container: lease cycles until no change is waiting, then `done` (in the
 * same turn as the last look at the queue, so no change can join a queue nobody drains). Never rejects.
 */
async function writeWhilePending(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  queue: Pending[],
  done: () => void,
): Promise<void> {
  while (queue.length) {
    try {
      const lease = await takeLease(orgId, ref, queue);
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
  /** When this lease runs out (epoch ms, as written on the item). */
  expiresAt: number;
  /**
   * The lease attributes as they were before this lease was taken. `lockToken` (kept when a lease is
   * released) is the token of the last lease taken: when it is the token of this container's last write
   * of the bundle, nobody wrote the bundle since (`currentValues`).
   */
  before: Pick<BundleMeta, 'lockToken' | 'lockExpiresAt' | 'orgId'>;
}

/** The metadata a writer reads when its lease write fails, to tell why. */
type LeaseProbe = Pick<BundleMeta, 'applicationId' | 'orgId' | 'lockExpiresAt'>;

/**
 * Take the bundle's lease for `orgId`'s changes in `queue`: a conditional write on its metadata item (the
 * caller's organization owns it, and it is free or its holder's lease expired), retried with jittered
 * backoff while another writer holds it. The write is also the tenancy check: the item records the
 * organization of its application (`orgId`, which never changes), so a bundle written before costs no
 * read of the application. When the write fails, one consistent read of the item tells why: another
 * organization's item answers 404 `application not found`; no item yet (or one written before items
 * recorded `orgId`) means the application is read once (`getApplication`: 404 unless the caller's org
 * owns it) and the lease taken on condition that the item names no other organization, recording the
 * caller's; otherwise the lease is busy.
 *
 * While only deletions wait, the lease is taken only on an item that exists: when there is none, the
 * deletions queued before any upsert are answered 404 `secret bundle not found` and no item is created.
 * A change that has waited `leaseTiming.waitMs` is answered 409. Returns undefined when no change is left waiting.
 */
async function takeLease(orgId: string, ref: BundleRef, queue: Pending[]): Promise<Lease | undefined> {
  const token = newId();
  const base = { TableName: table('secretBundles'), Key: { ...ref } };
  const free = '(attribute_not_exists(lockToken) OR lockExpiresAt < :now)';
  let verified = false; // the application was read in this call and is the caller's
  for (let attempt = 0; queue.length; attempt++) {
    const existing = queue.every((p) => 'remove' in p.change);
    const owner = verified ? '(attribute_not_exists(orgId) OR orgId = :org)' : 'orgId = :org';
    const now = Date.now();
    let taken: Lease['before'] | undefined;
    let expiresAt = 0;
    try {
      const res = await ddb().send(
        new UpdateCommand({
          ...base,
          UpdateExpression: 'SET lockToken = :t, lockExpiresAt = :exp, orgId = :org',
          ConditionExpression: `${owner} AND ${existing ? 'attribute_exists(applicationId) AND ' : ''}${free}`,
          ExpressionAttributeValues: {
            ':t': token,
            ':exp': now + leaseTiming.leaseMs,
            ':now': now,
            ':org': orgId,
          },
          ReturnValues: 'UPDATED_OLD',
        }),
      );
      taken = (res.Attributes ?? {}) as Lease['before'];
      expiresAt = now + leaseTiming.leaseMs;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    if (taken) {
      return { token, expiresAt, before: taken };
    }
    // The condition failed: another organization's item, no item (or one without `orgId`), or busy.
    const { Item } = await ddb().send(
      new GetCommand({
        ...base,
        ConsistentRead: true,
        ProjectionExpression: 'applicationId, orgId, lockExpiresAt',
      }),
    );
    const item = Item as LeaseProbe | undefined;
    const refuseDeletions = () => {
      const first = queue.findIndex((p) => !('remove' in p.change));
      for (const p of queue.splice(0, first < 0 ? queue.length : first)) {
        p.reject(new NotFoundError('secret bundle not found'));
      }
    };
    if (item?.orgId !== undefined) {
      if (item.orgId !== orgId) {
        for (const p of queue.splice(0)) p.reject(new NotFoundError('application not found'));
        continue;
      }
      // The caller's bundle: its lease is busy (wait below).
    } else if (!verified) {
      // No item yet, or one that does not record its organization: read the application once, then
      // try again at once.
      try {
        await getApplication(orgId, ref.applicationId);
      } catch (err) {
        for (const p of queue.splice(0)) p.reject(err);
        continue;
      }
      verified = true;
      if (!item && existing) refuseDeletions();
      continue;
    } else if (!item && existing) {
      refuseDeletions();
      continue;
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

/** Most bundles whose last written values a container keeps (`written`); at most 64 KB each. */
const WRITTEN_MAX = 64;

/**
 * The values this container last wrote to a bundle (or found in it, when its changes were all refused),
 * per store, with the lease token the item holds with them. When the next lease this container takes on
 * the bundle finds that token still on the item (`Lease.before`), nobody else has written the bundle
 * since, and the store need not be read. Every writer's lease replaces the token (writers of earlier
 * versions remove it when they release), and only a writer that wrote nothing puts the previous one back
 * (`releaseLease`), so a bundle another container wrote is always read. An entry is dropped when a
 * write fails (the store's state is unknown then); the oldest goes first beyond WRITTEN_MAX.
 */
const written = new WeakMap<SecretStore, Map<string, { token: string; values: Record<string, string> }>>();

function rememberWritten(
  store: SecretStore,
  ref: BundleRef,
  entry?: { token: string; values: Record<string, string> },
) {
  const bundles = written.get(store) ?? new Map();
  written.set(store, bundles);
  const id = `${ref.applicationId}\0${ref.app}`;
  bundles.delete(id);
  if (!entry) return;
  bundles.set(id, entry);
  if (bundles.size > WRITTEN_MAX) bundles.delete(bundles.keys().next().value!);
}

/** The bundle's values: those this container last wrote when nobody wrote since (`written`), else read. */
function currentValues(store: SecretStore, ref: BundleRef, lease: Lease) {
  const last = written.get(store)?.get(`${ref.applicationId}\0${ref.app}`);
  if (last && lease.before.lockToken !== undefined && last.token === lease.before.lockToken)
    return last.values;
  return store.read(ref);
}

/**
 * Under the lease: read the bundle's values (unless this container wrote them last: `currentValues`),
 * apply the changes of `batch` (`applyChanges`), write the whole bundle once when any was applied, then
 * commit the key metadata and release the lease in one write (`commitKeys`). When nothing was applied, or
 * a step failed, the lease is released without a commit (`releaseLease`). Requests are answered once the
 * lease is released.
 */
async function applyBatch(store: SecretStore, ref: BundleRef, lease: Lease, batch: Pending[]): Promise<void> {
  let outcomes: (Error | undefined)[] = [];
  let failure: { error: unknown } | undefined;
  let committed = false;
  let values: Record<string, string> | undefined;
  let wrote = false;
  try {
    const now = new Date().toISOString();
    const stored = await currentValues(store, ref, lease);
    values = stored;
    const applied = applyChanges(stored, batch, now);
    outcomes = applied.outcomes;
    if (outcomes.some((o) => o === undefined)) {
      values = undefined; // unknown until the write and its commit succeed
      const next = Object.fromEntries(applied.values);
      if (Date.now() + leaseTiming.writeBudgetMs > lease.expiresAt)
        throw new ConflictError(
          'the secret bundle was busy too long to be written safely: nothing was changed; retry',
        );
      wrote = true;
      await store.write(ref, next);
      await commitKeys(ref, lease, applied.values, applied.touched, now, stored === undefined);
      committed = true;
      values = next;
    }
  } catch (error) {
    failure = { error };
  }
  if (!committed) await releaseLease(ref, lease, wrote).catch((error) => (failure ??= { error }));
  // The token the item now holds with these values: this lease's after a commit; after a release
  // that wrote nothing, the token put back (`releaseLease`).
  const token = committed ? lease.token : lease.before.lockToken;
  rememberWritten(store, ref, failure || !values || !token ? undefined : { token, values });
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
        UpdateExpression: 'SET #keys = :keys, updatedAt = :now, lockExpiresAt = :released',
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#keys': 'keys' },
        ExpressionAttributeValues: { ':keys': keys, ':now': now, ':t': lease.token, ':released': 0 },
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
    const values: Record<string, unknown> = { ':now': now, ':t': lease.token, ':released': 0 };
    const sets = ['updatedAt = :now', 'lockExpiresAt = :released'];
    const removes: string[] = [];
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
        UpdateExpression: `SET ${sets.join(', ')}${removes.length ? ` REMOVE ${removes.join(', ')}` : ''}`,
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
 * write leaves no row. When the bundle was not written (`wrote` false: every change was refused), the
 * lease attributes are put back as they were (`Lease.before`), so the item is left exactly as found and
 * the last writer's memory of the values stays valid; after a write that did not commit, the lease is
 * released under this writer's token, so no writer takes the values it remembers for current.
 */
async function releaseLease(ref: BundleRef, lease: Lease, wrote: boolean): Promise<void> {
  const base = { TableName: table('secretBundles'), Key: { ...ref } };
  const deleted = await fenced(
    new DeleteCommand({
      ...base,
      ConditionExpression: 'lockToken = :t AND attribute_not_exists(#keys)',
      ExpressionAttributeNames: { '#keys': 'keys' },
      ExpressionAttributeValues: { ':t': lease.token },
    }),
  );
  if (deleted) return;
  const restore: Lease['before'] = wrote ? { lockToken: lease.token, lockExpiresAt: 0 } : lease.before;
  const sets: string[] = [];
  const removes: string[] = [];
  const values: Record<string, unknown> = { ':t': lease.token };
  for (const name of ['lockToken', 'lockExpiresAt', 'orgId'] as const) {
    const value = restore[name];
    if (value !== undefined) {
      sets.push(`${name} = :${name}`);
      values[`:${name}`] = value;
    } else if (name !== 'orgId' || !wrote) removes.push(name);
  }
  await fenced(
    new UpdateCommand({
      ...base,
      UpdateExpression: [
        sets.length ? `SET ${sets.join(', ')}` : '',
        removes.length ? `REMOVE ${removes.join(', ')}` : '',
      ].join(' '),
      ConditionExpression: 'lockToken = :t',
      ExpressionAttributeValues: values,
    }),
  );
}

/**
 * Merge key/value pairs into a bundle (batch and single-key upsert). The first write creates the bundle;
 * keys not named are kept. Steps, as the bundle's only writer (`submit`): take the lease, which is also
 * the tenancy check (404 unless the org owns the application: `takeLease`); read the values (unless this
 * container wrote them last), merge, refuse (400, nothing written) a bundle over 64 KB; write the whole
 * bundle; record key metadata and release the lease. Returns how many keys were merged.
 */
export async function upsertSecrets(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  items: { key: string; value: string }[],
): Promise<number> {
  for (const item of items) refuseReservedKey(item.key);
  const upsert = new Map(items.map((i) => [i.key, i.value]));
  await submit(store, orgId, ref, { upsert });
  return upsert.size;
}

/**
 * Delete one key. Steps, as the bundle's only writer (`submit`, which creates no item for a bundle that
 * does not exist): take the lease (404 unless the org owns the application), 404 when the bundle or the
 * key does not exist; write the bundle without it; record metadata and release the lease.
 */
export async function deleteSecret(
  store: SecretStore,
  orgId: string,
  ref: BundleRef,
  key: string,
): Promise<void> {
  refuseReservedKey(key);
  await submit(store, orgId, ref, { remove: key });
}
