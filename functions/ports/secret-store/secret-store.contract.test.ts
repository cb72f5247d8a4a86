import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  InvalidRequestException,
  LimitExceededException,
  PutSecretValueCommand,
  ResourceExistsException,
  ResourceNotFoundException,
  RestoreSecretCommand,
  SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { LocalSecretStore } from './local-files.js';
import type { SecretStore } from './port.js';
import { SecretsManagerStore } from './secrets-manager.js';

/*
 * The SecretStore contract, run against every adapter: the local encrypted files, and Secrets Manager at
 * the SDK boundary (aws-sdk-client-mock on the adapter's SecretsManagerClient, answering from an in-memory
 * map the way the service does: GetSecretValue/PutSecretValue of a missing secret →
 * ResourceNotFoundException, CreateSecret of an existing one → ResourceExistsException). Adapter-specific
 * behaviour follows the contract. The SDK's own retries of a call are the SDK's (not run under the mock);
 * registry/aws-clients.test.ts runs the container's client against a loopback fake.
 */

const dir = mkdtempSync(join(tmpdir(), 'secret-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const secrets = new Map<string, string>();
const client = new SecretsManagerClient({ region: 'eu-west-1' });
const secretsManager = mockClient(client);

/** An error the service answers, as the SDK raises it (its modeled class when it has one). */
function fault<E extends Error>(
  Modeled: new (opts: { message: string; $metadata: object }) => E,
  message: string,
): E {
  return new Modeled({ message, $metadata: { httpStatusCode: 400 } });
}
/** An error code Secrets Manager does not model (AccessDeniedException, ThrottlingException…). */
function unmodeled(name: string, message: string) {
  return new SecretsManagerServiceException({
    name,
    message,
    $fault: 'client',
    $metadata: { httpStatusCode: 400 },
  });
}
const notFound = () => fault(ResourceNotFoundException, "Secrets Manager can't find the specified secret.");

/** What the adapter sent, in order: each command's name (without `Command`) and input. */
function sent() {
  return secretsManager.calls().map((call) => {
    const command = call.args[0];
    return {
      operation: command.constructor.name.replace(/Command$/, ''),
      input: command.input as Record<string, unknown>,
    };
  });
}
const sentOf = (operation: string) =>
  sent()
    .filter((s) => s.operation === operation)
    .map((s) => s.input);

function inMemorySecretsManager() {
  secrets.clear();
  secretsManager.reset();
  secretsManager.on(GetSecretValueCommand).callsFake(({ SecretId }) => {
    if (!secrets.has(SecretId)) throw notFound();
    return { ARN: SecretId, Name: SecretId, SecretString: secrets.get(SecretId), CreatedDate: new Date() };
  });
  secretsManager.on(PutSecretValueCommand).callsFake(({ SecretId, SecretString }) => {
    if (!secrets.has(SecretId)) throw notFound();
    secrets.set(SecretId, SecretString);
    return { ARN: SecretId };
  });
  secretsManager.on(CreateSecretCommand).callsFake(({ Name, SecretString }) => {
    if (secrets.has(Name)) throw fault(ResourceExistsException, 'the secret already exists');
    secrets.set(Name, SecretString);
    return { ARN: Name, Name };
  });
}

const secretsManagerStore = () => new SecretsManagerStore(client, 'preview');

function secretStoreContract(name: string, make: () => SecretStore) {
  describe(`${name} honours the SecretStore contract`, () => {
    test('a bundle never written reads as undefined', async () => {
      expect(await make().read({ applicationId: 'never', app: 'web' })).toBeUndefined();
    });

    test('write creates, a second write replaces the whole bundle', async () => {
      const store = make();
      const ref = { applicationId: 'a1', app: 'web' };
      await store.write(ref, { A: '1', B: '2' });
      expect(await store.read(ref)).toEqual({ A: '1', B: '2' });
      await store.write(ref, { B: '3' });
      expect(await store.read(ref)).toEqual({ B: '3' });
    });

    test('bundles of other apps and applications are independent', async () => {
      const store = make();
      await store.write({ applicationId: 'a2', app: 'web' }, { X: 'web' });
      await store.write({ applicationId: 'a2', app: 'api' }, { X: 'api' });
      await store.write({ applicationId: 'a3', app: 'web' }, { X: 'other' });
      expect(await store.read({ applicationId: 'a2', app: 'web' })).toEqual({ X: 'web' });
      expect(await store.read({ applicationId: 'a2', app: 'api' })).toEqual({ X: 'api' });
    });

    test('concurrent writes of 100 bundles are independent', async () => {
      const store = make();
      const refs = Array.from({ length: 100 }, (_, i) => ({ applicationId: 'many', app: `app-${i}` }));
      await Promise.all(refs.map((ref) => store.write(ref, { APP: ref.app })));
      const read = await Promise.all(refs.map((ref) => store.read(ref)));
      expect(read).toEqual(refs.map((ref) => ({ APP: ref.app })));
    });

    test('a write replaces the bundle atomically: concurrent writes of one bundle leave one of them whole', async () => {
      const store = make();
      const ref = { applicationId: 'atomic', app: 'web' };
      const versions = Array.from({ length: 20 }, (_, i) =>
        Object.fromEntries(Array.from({ length: 50 }, (_, k) => [`K${k}`, `v${i}-${'x'.repeat(200)}`])),
      );
      await Promise.all(versions.map((values) => store.write(ref, values)));
      expect(versions).toContainEqual(await store.read(ref));
    });

    test('values round-trip exactly: unicode, newlines, empty strings, JSON-looking text', async () => {
      const store = make();
      const ref = { applicationId: 'a4', app: 'web' };
      const values = {
        PEM: '-----BEGIN KEY-----\nabc\n-----END KEY-----\n',
        U: 'ünï ✓ 🔑',
        E: '',
        J: '{"a":1}',
      };
      await store.write(ref, values);
      expect(await store.read(ref)).toEqual(values);
    });
  });
}

beforeEach(() => inMemorySecretsManager());

secretStoreContract('LocalSecretStore', () => new LocalSecretStore(dir));
secretStoreContract('SecretsManagerStore', secretsManagerStore);

describe('LocalSecretStore specifics', () => {
  test('values are encrypted at rest under a 0600 key file', async () => {
    const own = mkdtempSync(join(dir, 'enc-'));
    const store = new LocalSecretStore(own);
    await store.write({ applicationId: 'a', app: 'web' }, { API_TOKEN: 'plaintext-needle' });
    expect(statSync(join(own, 'secrets.key')).mode & 0o777).toBe(0o600);
    const files = readdirSync(join(own, 'secrets'));
    expect(files).toHaveLength(1);
    const blob = readFileSync(join(own, 'secrets', files[0]!));
    expect(blob.includes('plaintext-needle')).toBe(false);
    expect(blob.includes('API_TOKEN')).toBe(false);
    expect(await new LocalSecretStore(own).read({ applicationId: 'a', app: 'web' })).toEqual({
      API_TOKEN: 'plaintext-needle',
    });
  });

  test('a write that stopped between its renames leaves the version before it readable, and the next write completes', async () => {
    const own = mkdtempSync(join(dir, 'renames-'));
    const store = new LocalSecretStore(own);
    const ref = { applicationId: 'r', app: 'web' };
    const secretsDir = join(own, 'secrets');
    await store.write(ref, { V: '1' });
    await store.write(ref, { V: '2' });
    // Two versions on disk: the current file and the one moved aside.
    const files = readdirSync(secretsDir).sort();
    expect(files).toHaveLength(2);
    const current = files.find((f) => !f.endsWith('.prev.bin'))!;
    const previous = files.find((f) => f.endsWith('.prev.bin'))!;
    // The next write moved the current file aside, then stopped before putting its own in place.
    rmSync(join(secretsDir, previous));
    renameSync(join(secretsDir, current), join(secretsDir, previous));
    expect(await store.read(ref)).toEqual({ V: '2' });
    await store.write(ref, { V: '3' });
    expect(await store.read(ref)).toEqual({ V: '3' });
    expect(await new LocalSecretStore(own).read(ref)).toEqual({ V: '3' });
    // The version it moved aside is the one it replaced, not lost in the retry.
    expect(readdirSync(secretsDir).sort()).toEqual([current, previous].sort());
  });

  test('a tampered file fails authentication instead of yielding wrong values', async () => {
    const own = mkdtempSync(join(dir, 'tamper-'));
    const store = new LocalSecretStore(own);
    await store.write({ applicationId: 't', app: 'web' }, { K: 'v' });
    for (const f of readdirSync(join(own, 'secrets')).map((n) => join(own, 'secrets', n))) {
      const blob = readFileSync(f);
      blob[blob.length - 1]! ^= 0xff;
      writeFileSync(f, blob);
    }
    await expect(store.read({ applicationId: 't', app: 'web' })).rejects.toThrow();
  });
});

describe('SecretsManagerStore specifics', () => {
  const store = secretsManagerStore;
  const ref = { applicationId: 'app1', app: 'web' };
  const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

  test('one secret per (application, app), named <prefix>/<applicationId>/<app>', async () => {
    await store().write(ref, { A: '1' });
    expect([...secrets.keys()]).toEqual(['preview/app1/web']);
  });

  test('the first write creates the secret, tagged; later writes put a new value', async () => {
    await store().write(ref, { A: '1' });
    await store().write(ref, { A: '2' });
    expect(sent()).toEqual([
      {
        operation: 'PutSecretValue',
        input: { SecretId: 'preview/app1/web', ClientRequestToken: uuid, SecretString: '{"A":"1"}' },
      },
      {
        operation: 'CreateSecret',
        input: {
          Name: 'preview/app1/web',
          ClientRequestToken: uuid,
          SecretString: '{"A":"1"}',
          Description: 'Preview env vars of app web of application app1',
          Tags: [
            { Key: 'preview:applicationId', Value: 'app1' },
            { Key: 'preview:app', Value: 'web' },
          ],
        },
      },
      {
        operation: 'PutSecretValue',
        input: { SecretId: 'preview/app1/web', ClientRequestToken: uuid, SecretString: '{"A":"2"}' },
      },
    ]);
    // A new version id per write (the SDK's retries of one call reuse its serialized token).
    expect(new Set(sent().map((s) => s.input.ClientRequestToken)).size).toBe(3);
  });

  test('a secret another writer created between the two calls gets the value put on it', async () => {
    secretsManager.on(PutSecretValueCommand).callsFake(({ SecretId, SecretString }) => {
      if (!secrets.has(SecretId)) {
        secrets.set(SecretId, '{"OTHER":"1"}'); // the other writer's CreateSecret lands now
        throw fault(ResourceNotFoundException, 'not found');
      }
      secrets.set(SecretId, SecretString);
      return {};
    });
    await store().write(ref, { A: '1' });
    expect(sent().map((s) => s.operation)).toEqual(['PutSecretValue', 'CreateSecret', 'PutSecretValue']);
    expect(await store().read(ref)).toEqual({ A: '1' });
  });

  test('reads send GetSecretValue with the secret name', async () => {
    secrets.set('preview/app1/web', '{"A":"1"}');
    expect(await store().read(ref)).toEqual({ A: '1' });
    expect(sent()).toEqual([{ operation: 'GetSecretValue', input: { SecretId: 'preview/app1/web' } }]);
  });

  test('a secret without a string value (binary) reads as undefined', async () => {
    secretsManager.on(GetSecretValueCommand).resolves({ ARN: 'a', SecretBinary: Buffer.from('x') });
    expect(await store().read(ref)).toBeUndefined();
  });

  test('a value that is not JSON fails without quoting it', async () => {
    secrets.set('preview/app1/web', 'not-json-needle');
    const err = await store()
      .read(ref)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe('secret preview/app1/web does not hold a JSON object of env vars');
    expect(String((err as Error).stack)).not.toContain('needle');
  });

  test('errors other than not-found propagate, named by their code, quoting no value', async () => {
    secretsManager
      .on(GetSecretValueCommand)
      .rejects(unmodeled('AccessDeniedException', 'not authorized to GetSecretValue'));
    await expect(store().read(ref)).rejects.toMatchObject({ name: 'AccessDeniedException' });
    secretsManager.on(PutSecretValueCommand).rejects(unmodeled('ThrottlingException', 'Rate exceeded'));
    const err = await store()
      .write(ref, { K: 'value-needle' })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ThrottlingException', $fault: 'client' });
    expect(sentOf('PutSecretValue')).toHaveLength(1);
    expect(sentOf('CreateSecret')).toEqual([]);
    expect(`${String((err as Error).stack)} ${JSON.stringify(err)}`).not.toContain('needle');
  });

  test('a secret scheduled for deletion reads as absent; a write restores it and puts the value', async () => {
    const marked = () =>
      fault(
        InvalidRequestException,
        "You can't perform this operation on the secret because it was marked for deletion.",
      );
    let deleted = true;
    secrets.set('preview/app1/web', '{"OLD":"1"}');
    secretsManager.on(GetSecretValueCommand).callsFake(({ SecretId }) => {
      if (deleted) throw marked();
      return { ARN: SecretId, SecretString: secrets.get(SecretId) };
    });
    secretsManager.on(PutSecretValueCommand).callsFake(({ SecretId, SecretString }) => {
      if (deleted) throw marked();
      secrets.set(SecretId, SecretString);
      return { ARN: SecretId };
    });
    secretsManager.on(RestoreSecretCommand).callsFake(({ SecretId }) => {
      deleted = false;
      return { ARN: SecretId };
    });
    expect(await store().read(ref)).toBeUndefined();
    await store().write(ref, { NEW: '2' });
    expect(sent().map((s) => s.operation)).toEqual([
      'GetSecretValue',
      'PutSecretValue',
      'RestoreSecret',
      'PutSecretValue',
    ]);
    expect(sentOf('RestoreSecret')).toEqual([{ SecretId: 'preview/app1/web' }]);
    expect(await store().read(ref)).toEqual({ NEW: '2' });
    // Another invalid request is not taken for it.
    secretsManager.on(GetSecretValueCommand).rejects(fault(InvalidRequestException, 'something else'));
    await expect(store().read(ref)).rejects.toMatchObject({ name: 'InvalidRequestException' });
  });

  test('a CreateSecret failure other than exists propagates', async () => {
    secretsManager.on(CreateSecretCommand).rejects(fault(LimitExceededException, 'too many secrets'));
    await expect(store().write(ref, { A: '1' })).rejects.toMatchObject({ name: 'LimitExceededException' });
  });
});
