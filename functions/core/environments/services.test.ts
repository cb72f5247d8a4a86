import { describe, expect, test } from '@jest/globals';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import { forgetServiceCredentials, serviceCredentialsRef, serviceLaunches } from './services.js';

class MemoryStore implements SecretStore {
  readonly bundles = new Map<string, Record<string, string>>();
  writes = 0;
  private key = (ref: BundleRef) => `${ref.applicationId}/${ref.app}`;
  async read(ref: BundleRef) {
    return this.bundles.get(this.key(ref));
  }
  async write(ref: BundleRef, values: Record<string, string>) {
    this.writes++;
    this.bundles.set(this.key(ref), { ...values });
  }
}

const env = { orgId: 'org1', envKey: 'acme#web#7' };
const db = { kind: 'postgres' as const, version: '16', seedApp: 'api' };

describe('service credentials', () => {
  test('generated once per service and environment, stored, then reused', async () => {
    const store = new MemoryStore();
    const first = await serviceLaunches({ secrets: store }, env, { db });
    expect(first).toEqual([
      { name: 'db', spec: db, user: 'preview', password: expect.stringMatching(/^[\w-]{32}$/) },
    ]);
    const again = await serviceLaunches({ secrets: store }, env, { db });
    expect(again[0]!.password).toBe(first[0]!.password);
    expect(store.writes).toBe(1);
    const other = await serviceLaunches({ secrets: store }, { ...env, envKey: 'acme#web#8' }, { db });
    expect(other[0]!.password).not.toBe(first[0]!.password);
    // The bundle is the environment's own: no app name holds a dot.
    expect(serviceCredentialsRef(env)).toEqual({
      applicationId: 'org1',
      app: expect.stringMatching(/^services\.[0-9a-f]{32}$/),
    });
  });

  test('no services: nothing read or written; teardown empties the bundle', async () => {
    const store = new MemoryStore();
    expect(await serviceLaunches({ secrets: store }, env, undefined)).toEqual([]);
    expect(store.writes).toBe(0);
    await forgetServiceCredentials({ secrets: store }, env);
    expect(store.writes).toBe(0);
    await serviceLaunches({ secrets: store }, env, { db });
    await forgetServiceCredentials({ secrets: store }, env);
    expect(await store.read(serviceCredentialsRef(env))).toEqual({});
  });
});
