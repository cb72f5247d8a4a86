import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { LocalArtifacts } from './local-files.js';
import type { Artifacts } from './port.js';
import { S3Artifacts } from './s3.js';

/*
 * The Artifacts contract, run against every adapter: local files, and S3 through the real SDK client
 * pointed at the loopback AWS fake (its endpoint given the way AWS_ENDPOINT_URL_S3 would).
 */

const dir = mkdtempSync(join(tmpdir(), 'artifacts-'));
let aws: FakeAws;
beforeAll(async () => {
  aws = await new FakeAws(dir).start();
});
afterAll(async () => {
  await aws.stop();
  rmSync(dir, { recursive: true, force: true });
});

function artifactsContract(name: string, make: () => Artifacts) {
  describe(`${name} honours the Artifacts contract`, () => {
    test('an object is absent until put, then present; put replaces', async () => {
      const store = make();
      const key = `sources/org/acme/shop/${Date.now()}.tar.gz`;
      expect(await store.exists(key)).toBe(false);
      await store.put(key, Readable.from([Buffer.from('first')]), 'application/gzip');
      expect(await store.exists(key)).toBe(true);
      await store.put(key, Readable.from([Buffer.from('second')]), 'application/gzip');
      expect(await store.exists(key)).toBe(true);
    });

    test('a stream of many chunks arrives whole', async () => {
      const store = make();
      const chunks = Array.from({ length: 200 }, (_, i) => Buffer.alloc(1024, i % 256));
      await store.put('sources/big.tar.gz', Readable.from(chunks), 'application/gzip');
      expect(await store.exists('sources/big.tar.gz')).toBe(true);
    });

    test('location names where a consumer finds the object', () => {
      expect(make().location('sources/a.tar.gz')).toMatch(/sources\/a\.tar\.gz$/);
    });
  });
}

artifactsContract('LocalArtifacts', () => new LocalArtifacts(dir));
artifactsContract(
  'S3Artifacts',
  () =>
    new S3Artifacts(
      new S3Client({
        region: 'eu-west-1',
        endpoint: aws.url,
        credentials: { accessKeyId: 'fake', secretAccessKey: 'fake' },
      }),
      'preview-artifacts',
    ),
);

describe('specifics', () => {
  test('LocalArtifacts writes the bytes under the data dir and refuses keys that climb out', async () => {
    const store = new LocalArtifacts(dir);
    await store.put('sources/x.tar.gz', Readable.from([Buffer.from('bytes')]), 'application/gzip');
    expect(readFileSync(store.location('sources/x.tar.gz'), 'utf8')).toBe('bytes');
    expect(() => store.location('../escape')).toThrow();
  });

  test('S3Artifacts puts the object in its bucket, byte for byte, with its content type', async () => {
    const s3 = new S3Artifacts(
      new S3Client({
        region: 'eu-west-1',
        endpoint: aws.url,
        credentials: { accessKeyId: 'f', secretAccessKey: 'f' },
      }),
      'preview-artifacts',
    );
    const payload = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    await s3.put(
      'sources/y.tar.gz',
      Readable.from([payload.subarray(0, 100), payload.subarray(100)]),
      'application/gzip',
    );
    const stored = aws.objects.get('preview-artifacts/sources/y.tar.gz');
    expect(stored?.body.equals(payload)).toBe(true);
    expect(stored?.contentType).toBe('application/gzip');
    expect(s3.location('sources/y.tar.gz')).toBe('s3://preview-artifacts/sources/y.tar.gz');
  });
});
