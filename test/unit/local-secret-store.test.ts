import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { LocalSecretStore } from '../../functions/adapters/local/secret-store.js';

const dir = mkdtempSync(join(tmpdir(), 'secret-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('LocalSecretStore', () => {
  test('values are encrypted at rest under a 0600 key file', async () => {
    const store = new LocalSecretStore(dir);
    await store.write({ applicationId: 'a', app: 'web' }, { API_TOKEN: 'plaintext-needle' });
    expect(statSync(join(dir, 'secrets.key')).mode & 0o777).toBe(0o600);
    const files = readdirSync(join(dir, 'secrets'));
    expect(files).toHaveLength(1);
    const blob = readFileSync(join(dir, 'secrets', files[0]!));
    expect(blob.includes('plaintext-needle')).toBe(false);
    expect(blob.includes('API_TOKEN')).toBe(false);
    expect(await new LocalSecretStore(dir).read({ applicationId: 'a', app: 'web' })).toEqual({
      API_TOKEN: 'plaintext-needle',
    });
  });

  test('bundles are independent and absent ones read as undefined', async () => {
    const store = new LocalSecretStore(dir);
    expect(await store.read({ applicationId: 'a', app: 'api' })).toBeUndefined();
    await store.write({ applicationId: 'b', app: 'web' }, { X: '1' });
    expect(await store.read({ applicationId: 'a', app: 'web' })).toEqual({ API_TOKEN: 'plaintext-needle' });
  });

  test('a tampered file fails authentication instead of yielding wrong values', async () => {
    const store = new LocalSecretStore(dir);
    await store.write({ applicationId: 't', app: 'web' }, { K: 'v' });
    const files = readdirSync(join(dir, 'secrets')).map((f) => join(dir, 'secrets', f));
    for (const f of files) {
      const blob = readFileSync(f);
      blob[blob.length - 1]! ^= 0xff;
      writeFileSync(f, blob);
    }
    await expect(store.read({ applicationId: 't', app: 'web' })).rejects.toThrow();
  });
});
