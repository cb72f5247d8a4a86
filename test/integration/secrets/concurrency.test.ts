import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { DeleteCommand, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { createApplication } from '../../../functions/core/applications/applications.js';
import { deleteSecret, leaseTiming, upsertSecrets } from '../../../functions/core/secrets/bundles.js';
import { LocalSecretStore } from '../../../functions/ports/secret-store/local-files.js';
import type { BundleRef, SecretStore } from '../../../functions/ports/secret-store/port.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { ConflictError, NotFoundError, ValidationError } from '../../../functions/shared/errors.js';
import { REPO_ROOT } from '../../../lib/local/server.js';
import { bearer, call } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * Concurrent writers of one secret bundle. Writers are serialized by a lease on the
 * bundle's metadata item; within one process, changes that arrive while the bundle's writer waits for or
 * holds the lease are applied together, each judged on its own (core/secrets.ts). These tests check that
 * no change is lost or misjudged that way, in one process and across processes (as across Lambda
 * containers), and that a lease another writer holds is respected.
 */

const h = localServerForFile();
let auth: Record<string, string>;
let appId: string;
let store: LocalSecretStore;
const path = (app: string, key?: string) => `/v1/preview/secrets/${appId}/${app}${key ? `/${key}` : ''}`;
const valueFor = (key: string) => `value of ${key}`;
const listed = async (app: string) =>
  ((await call(h, 'GET', path(app), { headers: auth })).body.keys as { key: string; updatedAt: string }[]) ??
  [];
const bundleItem = async (app: string) =>
  (
    await ddb().send(
      new GetCommand({
        TableName: table('secretBundles'),
        Key: { applicationId: appId, app },
        ConsistentRead: true,
      }),
    )
  ).Item;

/** Hold a bundle's lease as another container would, until `expiresInMs` from now. */
const holdLease = (app: string, token: string, expiresInMs: number) =>
  ddb().send(
    new UpdateCommand({
      TableName: table('secretBundles'),
      Key: { applicationId: appId, app },
      UpdateExpression: 'SET lockToken = :t, lockExpiresAt = :exp',
      ExpressionAttributeValues: { ':t': token, ':exp': Date.now() + expiresInMs },
    }),
  );

/** The local store, counting its reads and writes. */
function countingStore(): SecretStore & { reads: number; writes: number } {
  const inner = new LocalSecretStore(h.dataDir);
  const counting = {
    reads: 0,
    writes: 0,
    read: (ref: BundleRef) => {
      counting.reads++;
      return inner.read(ref);
    },
    write: (ref: BundleRef, values: Record<string, string>) => {
      counting.writes++;
      return inner.write(ref, values);
    },
  };
  return counting;
}

/** A promise's outcome, readable before it settles (`undefined` until then). */
function track<T>(p: Promise<T>) {
  const t: { outcome?: { ok: true; value: T } | { ok: false; error: unknown } } = {};
  p.then(
    (value) => (t.outcome = { ok: true, value }),
    (error) => (t.outcome = { ok: false, error }),
  );
  return t;
}

beforeAll(async () => {
  auth = bearer(h.org);
  appId = (await createApplication({ orgId: h.org.orgId, repoFullName: 'acme/concurrent' })).applicationId;
  store = new LocalSecretStore(h.dataDir);
});

describe('a writer whose lease ran short', () => {
  test('writes nothing when too little of its lease is left (its read was slow): 409, no key lost', async () => {
    const app = 'slow-read';
    const ref = { applicationId: appId, app };
    await upsertSecrets(store, h.org.orgId, ref, [{ key: 'FIRST', value: valueFor('FIRST') }]);
    const saved = { ...leaseTiming };
    // A 2 s lease, a 1 s write budget, and a bundle read that takes 1.5 s (from another container's view:
    // this container did not write the bundle last, so it reads it).
    Object.assign(leaseTiming, { leaseMs: 2_000, writeBudgetMs: 1_000 });
    const slow = countingStore();
    const read = slow.read;
    slow.read = async (r: BundleRef) => {
      await new Promise((done) => setTimeout(done, 1_500));
      return read(r);
    };
    try {
      await expect(
        upsertSecrets(slow, h.org.orgId, ref, [{ key: 'LATE', value: valueFor('LATE') }]),
      ).rejects.toThrow(
        new ConflictError(
          'the secret bundle was busy too long to be written safely: nothing was changed; retry',
        ),
      );
      expect([slow.reads, slow.writes]).toEqual([1, 0]);
    } finally {
      Object.assign(leaseTiming, saved);
    }
    // Released, and nothing lost: the next writer goes in at once.
    expect(await bundleItem(app)).toMatchObject({ lockExpiresAt: 0 });
    expect(await store.read(ref)).toEqual({ FIRST: valueFor('FIRST') });
    await upsertSecrets(slow, h.org.orgId, ref, [{ key: 'LATE', value: valueFor('LATE') }]);
    expect(await store.read(ref)).toEqual({ FIRST: valueFor('FIRST'), LATE: valueFor('LATE') });
  });
});

describe('concurrent writers of one secret bundle', () => {
  test('100 concurrent single-key upserts to one bundle: every one answered 200, none lost', async () => {
    const keys = Array.from({ length: 100 }, (_, i) => `KEY_${i}`);
    const results = await Promise.all(
      keys.map((k) => call(h, 'PUT', path('hundred', k), { body: { value: valueFor(k) }, headers: auth })),
    );
    expect(results.map((r) => r.status)).toEqual(keys.map(() => 200));
    expect(results.map((r) => r.body)).toEqual(
      keys.map((key) => ({ applicationId: appId, app: 'hundred', key, status: 'saved' })),
    );
    expect((await listed('hundred')).map((k) => k.key).sort()).toEqual([...keys].sort());
    expect(await store.read({ applicationId: appId, app: 'hundred' })).toEqual(
      Object.fromEntries(keys.map((k) => [k, valueFor(k)])),
    );
    expect(await bundleItem('hundred')).toMatchObject({ lockExpiresAt: 0 }); // released
  });

  test('concurrent upserts, deletes and refused changes to one bundle are each judged on their own', async () => {
    const app = 'mixed';
    const old = Array.from({ length: 20 }, (_, i) => `OLD_${i}`);
    await call(h, 'PUT', path(app), {
      body: { items: old.map((k) => ({ key: k, value: valueFor(k) })) },
      headers: auth,
    });
    const oldMeta = await listed(app);
    const fresh = Array.from({ length: 40 }, (_, i) => `NEW_${i}`);
    const requests = [
      ...fresh.map((k) => ['put', k] as const),
      ...old.slice(0, 10).map((k) => ['delete', k] as const),
      ...Array.from({ length: 10 }, (_, i) => ['delete', `ABSENT_${i}`] as const),
      ['too-big', 'HUGE'] as const,
    ].sort(() => Math.random() - 0.5);
    const results = await Promise.all(
      requests.map(([kind, key]) =>
        kind === 'delete'
          ? call(h, 'DELETE', path(app, key), { headers: auth })
          : call(h, 'PUT', path(app, key), {
              body: { value: kind === 'put' ? valueFor(key) : 'x'.repeat(65_536) },
              headers: auth,
            }),
      ),
    );
    requests.forEach(([kind, key], i) => {
      const res = results[i]!;
      if (kind === 'put') expect([key, res.status]).toEqual([key, 200]);
      else if (kind === 'too-big') {
        expect(res.status).toBe(400);
        expect(res.body.error).toMatch(/limit is 65536/);
      } else if (key.startsWith('OLD_'))
        expect([key, res.status, res.body.status]).toEqual([key, 200, 'deleted']);
      else expect([key, res.status, res.body]).toEqual([key, 404, { error: 'secret key not found' }]);
    });
    const expected = [...old.slice(10), ...fresh].sort();
    const meta = await listed(app);
    expect(meta.map((k) => k.key).sort()).toEqual(expected);
    // The keys nobody named kept their metadata.
    expect(meta.filter((k) => k.key.startsWith('OLD_'))).toEqual(
      oldMeta.filter((k) => !old.slice(0, 10).includes(k.key)),
    );
    expect(await store.read({ applicationId: appId, app })).toEqual(
      Object.fromEntries(expected.map((k) => [k, valueFor(k)])),
    );
  });

  test('a batch naming more keys than one metadata update may keeps the metadata of the keys it does not name', async () => {
    const app = 'wide';
    await call(h, 'PUT', path(app), {
      body: {
        items: [
          { key: 'KEEP', value: 'kept' },
          { key: 'DROP', value: 'dropped' },
        ],
      },
      headers: auth,
    });
    const before = (await listed(app)).find((k) => k.key === 'KEEP');
    await call(h, 'DELETE', path(app, 'DROP'), { headers: auth });
    const wide = Array.from({ length: 150 }, (_, i) => `WIDE_${i}`);
    const res = await call(h, 'PUT', path(app), {
      body: { items: wide.map((k) => ({ key: k, value: valueFor(k) })) },
      headers: auth,
    });
    expect(res.body).toEqual({ applicationId: appId, app, status: 'saved', count: 150 });
    const meta = await listed(app);
    expect(meta.map((k) => k.key).sort()).toEqual(['KEEP', ...wide].sort());
    expect(meta.find((k) => k.key === 'KEEP')).toEqual(before);
    expect(meta.find((k) => k.key === 'WIDE_7')).toEqual({
      key: 'WIDE_7',
      maskedLength: valueFor('WIDE_7').length,
      updatedAt: expect.any(String),
    });
    expect(await bundleItem(app)).toMatchObject({ lockExpiresAt: 0 }); // released
  });

  test('a bundle whose values were stored but whose metadata was never committed is repaired by the next write', async () => {
    // A writer that crashed between writing the values and committing leaves values and no `keys`.
    const app = 'half-written';
    await store.write({ applicationId: appId, app }, { ORPHAN: 'value' });
    const res = await call(h, 'PUT', path(app, 'NEXT'), { body: { value: valueFor('NEXT') }, headers: auth });
    expect(res.status).toBe(200);
    expect(await listed(app)).toEqual([
      { key: 'NEXT', maskedLength: valueFor('NEXT').length, updatedAt: expect.any(String) },
      { key: 'ORPHAN', maskedLength: 5, updatedAt: expect.any(String) },
    ]);
    expect(await store.read({ applicationId: appId, app })).toEqual({
      ORPHAN: 'value',
      NEXT: valueFor('NEXT'),
    });
    expect(await bundleItem(app)).toMatchObject({ lockExpiresAt: 0 }); // released
  });

  test('concurrent deletes from a bundle that was never written are all 404 and create nothing', async () => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call(h, 'DELETE', path('nothing-here', `K_${i}`), { headers: auth }),
      ),
    );
    expect(results.map((r) => [r.status, r.body])).toEqual(
      results.map(() => [404, { error: 'secret bundle not found' }]),
    );
    expect(await bundleItem('nothing-here')).toBeUndefined();
    expect(await store.read({ applicationId: appId, app: 'nothing-here' })).toBeUndefined();
  });

  test('changes wait while another writer holds the lease, keep what it stored, and then go in one write', async () => {
    const app = 'held';
    const ref = { applicationId: appId, app };
    await holdLease(app, 'other-container', 15_000);
    const counting = countingStore();
    const keys = Array.from({ length: 12 }, (_, i) => `QUEUED_${i}`);
    const upserts = keys.map((k) =>
      track(upsertSecrets(counting, h.org.orgId, ref, [{ key: k, value: valueFor(k) }])),
    );
    const tooBig = track(
      upsertSecrets(counting, h.org.orgId, ref, [{ key: 'HUGE', value: 'x'.repeat(65_536) }]),
    );
    const absent = track(deleteSecret(counting, h.org.orgId, ref, 'NEVER_STORED'));
    await new Promise((r) => setTimeout(r, 1_000));
    // Nothing was read or written while the other writer held the lease, and nobody was answered.
    expect([counting.reads, counting.writes]).toEqual([0, 0]);
    expect([...upserts, tooBig, absent].filter((t) => t.outcome)).toHaveLength(0);

    // The other writer stores its change and commits, releasing the lease (as a writer of an earlier
    // version does: it removes its token).
    await store.write(ref, { OTHER: valueFor('OTHER') });
    const now = new Date().toISOString();
    await ddb().send(
      new UpdateCommand({
        TableName: table('secretBundles'),
        Key: ref,
        UpdateExpression: 'SET #keys = :keys, updatedAt = :now REMOVE lockToken, lockExpiresAt',
        ConditionExpression: 'lockToken = :t',
        ExpressionAttributeNames: { '#keys': 'keys' },
        ExpressionAttributeValues: {
          ':keys': { OTHER: { maskedLength: valueFor('OTHER').length, updatedAt: now } },
          ':now': now,
          ':t': 'other-container',
        },
      }),
    );

    const deadline = Date.now() + 10_000;
    while ([...upserts, tooBig, absent].some((t) => !t.outcome) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(upserts.map((t) => t.outcome)).toEqual(keys.map(() => ({ ok: true, value: 1 })));
    expect(tooBig.outcome).toEqual({ ok: false, error: expect.any(ValidationError) });
    expect(absent.outcome).toEqual({ ok: false, error: new NotFoundError('secret key not found') });
    // Every waiting change went in with one read and one write of the bundle.
    expect([counting.reads, counting.writes]).toEqual([1, 1]);
    expect(await store.read(ref)).toEqual(
      Object.fromEntries(['OTHER', ...keys].map((k) => [k, valueFor(k)])),
    );
    const meta = await listed(app);
    expect(meta.map((k) => k.key).sort()).toEqual(['OTHER', ...keys].sort());
    expect(new Set(meta.filter((k) => k.key !== 'OTHER').map((k) => k.updatedAt)).size).toBe(1);
    expect(await bundleItem(app)).toMatchObject({ lockExpiresAt: 0 }); // released
  });

  test("a crashed writer's lease is taken over once it expires", async () => {
    const app = 'crashed';
    await call(h, 'PUT', path(app, 'BEFORE'), { body: { value: valueFor('BEFORE') }, headers: auth });
    await holdLease(app, 'crashed-container', 600);
    const started = Date.now();
    const res = await call(h, 'PUT', path(app, 'AFTER'), {
      body: { value: valueFor('AFTER') },
      headers: auth,
    });
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(await store.read({ applicationId: appId, app })).toEqual({
      BEFORE: valueFor('BEFORE'),
      AFTER: valueFor('AFTER'),
    });
  });

  test('a change that waits too long for a busy bundle is answered 409 and stores nothing', async () => {
    // WAIT_MS is 20 s; the lease stays busy for longer, then is dropped by its holder.
    const app = 'busy';
    const ref = { applicationId: appId, app };
    await holdLease(app, 'slow-container', 60_000);
    const started = Date.now();
    const err = await upsertSecrets(store, h.org.orgId, ref, [{ key: 'LATE', value: 'x' }]).catch((e) => e);
    expect(err).toEqual(new ConflictError('secret bundle is busy; retry'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(19_000);
    expect(await store.read(ref)).toBeUndefined();
    await ddb().send(new DeleteCommand({ TableName: table('secretBundles'), Key: ref }));
  }, 40_000);

  test('writers in two processes (as two containers) to one bundle lose nothing', async () => {
    const app = 'two-processes';
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'test/support/secret-writer.ts',
        h.dataDir,
        h.org.orgId,
        appId,
        app,
        'CHILD_',
        '50',
      ],
      { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } },
    );
    // Listened for at once: the child may finish its writes, and exit, before the parent's are answered.
    const exited = new Promise((r) => child.once('exit', r));
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    expect((await lines.next()).value).toBe('ready');
    child.stdin!.write('go\n');
    const keys = Array.from({ length: 50 }, (_, i) => `PARENT_${i}`);
    const [results, childLine] = await Promise.all([
      Promise.all(
        keys.map((k) => call(h, 'PUT', path(app, k), { body: { value: valueFor(k) }, headers: auth })),
      ),
      lines.next().then((r) => r.value as string),
    ]);
    await exited;
    expect(results.map((r) => r.status)).toEqual(keys.map(() => 200));
    expect(JSON.parse(childLine)).toEqual({ saved: 50, failed: [] });
    const all = [...keys, ...Array.from({ length: 50 }, (_, i) => `CHILD_${i}`)];
    expect((await listed(app)).map((k) => k.key).sort()).toEqual([...all].sort());
    expect(await store.read({ applicationId: appId, app })).toEqual(
      Object.fromEntries(all.map((k) => [k, valueFor(k)])),
    );
  }, 60_000);

  test('values this process wrote last are not read again; a bundle another writer changed since is', async () => {
    const app = 'remembered';
    const ref = { applicationId: appId, app };
    const put = async (key: string) =>
      (await call(h, 'PUT', path(app, key), { body: { value: valueFor(key) }, headers: auth })).status;
    expect(await put('SERVER_1')).toBe(200);
    // Another container (its own store object, so nothing remembered) writes twice: it reads the bundle
    // once, for its first write, and the second write starts from what it wrote.
    const other = countingStore();
    await upsertSecrets(other, h.org.orgId, ref, [{ key: 'OTHER_1', value: valueFor('OTHER_1') }]);
    await upsertSecrets(other, h.org.orgId, ref, [{ key: 'OTHER_2', value: valueFor('OTHER_2') }]);
    expect([other.reads, other.writes]).toEqual([1, 2]);
    // The server wrote the bundle before the other container did: it reads it again.
    expect(await put('SERVER_2')).toBe(200);
    // A writer of an earlier version (it removes its lease token when it commits) stores a key.
    await holdLease(app, 'older-writer', 15_000);
    await store.write(ref, { ...(await store.read(ref)), OLDER: valueFor('OLDER') });
    await ddb().send(
      new UpdateCommand({
        TableName: table('secretBundles'),
        Key: ref,
        UpdateExpression: 'SET #keys.#k = :m REMOVE lockToken, lockExpiresAt',
        ConditionExpression: 'lockToken = :t',
        ExpressionAttributeNames: { '#keys': 'keys', '#k': 'OLDER' },
        ExpressionAttributeValues: {
          ':m': { maskedLength: valueFor('OLDER').length, updatedAt: new Date().toISOString() },
          ':t': 'older-writer',
        },
      }),
    );
    expect(await put('SERVER_3')).toBe(200);
    // And the other container, which wrote last before those two, reads the bundle again too.
    await upsertSecrets(other, h.org.orgId, ref, [{ key: 'OTHER_3', value: valueFor('OTHER_3') }]);
    expect([other.reads, other.writes]).toEqual([2, 3]);
    const all = ['SERVER_1', 'OTHER_1', 'OTHER_2', 'SERVER_2', 'OLDER', 'SERVER_3', 'OTHER_3'];
    expect(await store.read(ref)).toEqual(Object.fromEntries(all.map((k) => [k, valueFor(k)])));
    expect((await listed(app)).map((k) => k.key).sort()).toEqual([...all].sort());
  });

  test("another organization's concurrent writes to a bundle are all 404 and change nothing", async () => {
    const app = 'contested';
    const theirs = bearer(await h.newOrg('contender'));
    const ours = Array.from({ length: 20 }, (_, i) => `OURS_${i}`);
    const results = await Promise.all(
      ours.flatMap((k) => [
        call(h, 'PUT', path(app, k), { body: { value: valueFor(k) }, headers: auth }),
        call(h, 'PUT', path(app, `THEIRS_${k}`), { body: { value: 'stolen' }, headers: theirs }),
        call(h, 'DELETE', path(app, k), { headers: theirs }),
      ]),
    );
    results.forEach((res, i) => {
      if (i % 3 === 0) expect(res.status).toBe(200);
      else expect([res.status, res.body]).toEqual([404, { error: 'application not found' }]);
    });
    expect(await store.read({ applicationId: appId, app })).toEqual(
      Object.fromEntries(ours.map((k) => [k, valueFor(k)])),
    );
    expect(await bundleItem(app)).toMatchObject({ orgId: h.org.orgId, lockExpiresAt: 0 });
    // The listing's one read is the bundle item, whose recorded organization is the tenancy check.
    const spy = jest.spyOn(ddb(), 'send');
    try {
      const peek = await call(h, 'GET', path(app), { headers: theirs });
      expect([peek.status, peek.body]).toEqual([404, { error: 'application not found' }]);
      expect((await listed(app)).map((s: { key: string }) => s.key)).toEqual([...ours].sort());
      // (Beside the fair share's request counters, bookkeeping every request writes: core/fair-share.ts.)
      const reads = spy.mock.calls.filter(
        ([c]) => (c.input as { TableName?: string }).TableName !== table('quotas'),
      );
      expect(reads.map(([c]) => c.constructor)).toEqual([GetCommand, GetCommand]);
    } finally {
      spy.mockRestore();
    }
  });

  test('a bundle item written before items recorded their organization is checked against the application', async () => {
    const app = 'legacy';
    const ref = { applicationId: appId, app };
    expect((await call(h, 'PUT', path(app, 'FIRST'), { body: { value: 'one' }, headers: auth })).status).toBe(
      200,
    );
    // As an earlier version left it: no `orgId`, no lease token.
    await ddb().send(
      new UpdateCommand({
        TableName: table('secretBundles'),
        Key: ref,
        UpdateExpression: 'REMOVE orgId, lockToken, lockExpiresAt',
      }),
    );
    const theirs = bearer(await h.newOrg('late-comer'));
    const foreign = await call(h, 'PUT', path(app, 'FIRST'), { body: { value: 'stolen' }, headers: theirs });
    expect([foreign.status, foreign.body]).toEqual([404, { error: 'application not found' }]);
    const gone = await call(h, 'DELETE', path(app, 'FIRST'), { headers: theirs });
    expect([gone.status, gone.body]).toEqual([404, { error: 'application not found' }]);
    // Listing it reads the application too: 404 to the other organization, the keys to the owner.
    const peek = await call(h, 'GET', path(app), { headers: theirs });
    expect([peek.status, peek.body]).toEqual([404, { error: 'application not found' }]);
    expect((await listed(app)).map((s: { key: string }) => s.key)).toEqual(['FIRST']);
    expect(await store.read(ref)).toEqual({ FIRST: 'one' });
    expect(await bundleItem(app)).not.toHaveProperty('orgId');
    expect(
      (await call(h, 'PUT', path(app, 'SECOND'), { body: { value: 'two' }, headers: auth })).status,
    ).toBe(200);
    expect(await store.read(ref)).toEqual({ FIRST: 'one', SECOND: 'two' });
    expect(await bundleItem(app)).toMatchObject({ orgId: h.org.orgId, lockExpiresAt: 0 });
  });

  test('no secret value reaches a log line', () => {
    const joined = h.logs.join('\n');
    expect(joined).not.toContain('value of ');
  });
});
