import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { S3Objects, type S3ObjectsOptions, s3TargetFromEnv } from '../../shared/s3-objects.js';
import { LocalArtifacts } from './local-files.js';
import type { Artifacts } from './port.js';
import { S3Artifacts } from './s3.js';

/*
 * The Artifacts contract, run against every adapter: local files, and S3 pointed at the loopback AWS fake
 * (its endpoint given by AWS_ENDPOINT_URL_S3, as in the cloud tier), both as one PutObject and as a
 * multipart upload (a small part size: the fake does not hold parts to S3's 5 MiB minimum).
 */

const dir = mkdtempSync(join(tmpdir(), 'artifacts-'));
let aws: FakeAws;
const ENV = ['AWS_ENDPOINT_URL_S3', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'] as const;
const savedEnv = Object.fromEntries(ENV.map((k) => [k, process.env[k]]));
beforeAll(async () => {
  aws = await new FakeAws(dir).start();
  Object.assign(process.env, {
    AWS_ENDPOINT_URL_S3: aws.url,
    AWS_ACCESS_KEY_ID: 'f',
    AWS_SECRET_ACCESS_KEY: 'f',
  });
});
afterAll(async () => {
  for (const k of ENV)
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
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
/** The artifacts bucket on the fake, reached the way a Lambda would (endpoint and credentials from env). */
const s3Artifacts = (opts: S3ObjectsOptions = {}) =>
  new S3Artifacts(new S3Objects(s3TargetFromEnv('eu-west-1'), 'preview-artifacts', opts));
artifactsContract('S3Artifacts', () => s3Artifacts());
artifactsContract('S3Artifacts (multipart)', () => s3Artifacts({ partSize: 10_000 }));

describe('specifics', () => {
  test('LocalArtifacts writes the bytes under the data dir and refuses keys that climb out', async () => {
    const store = new LocalArtifacts(dir);
    await store.put('sources/x.tar.gz', Readable.from([Buffer.from('bytes')]), 'application/gzip');
    expect(readFileSync(store.location('sources/x.tar.gz'), 'utf8')).toBe('bytes');
    expect(() => store.location('../escape')).toThrow();
  });

  test('S3Artifacts puts the object in its bucket, byte for byte, with its content type', async () => {
    const s3 = s3Artifacts();
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

  test('S3Artifacts: a stream longer than a part goes up in parts, reassembled byte for byte', async () => {
    const s3 = s3Artifacts({ partSize: 4096 });
    const payload = Buffer.from(Array.from({ length: 20_000 }, (_, i) => (i * 7) % 256));
    const chunks = Array.from({ length: 20 }, (_, i) => payload.subarray(i * 1000, (i + 1) * 1000));
    const before = aws.calls.length;
    await s3.put('sources/parts.tar.gz', Readable.from(chunks), 'application/gzip');
    const stored = aws.objects.get('preview-artifacts/sources/parts.tar.gz');
    expect(stored?.body.equals(payload)).toBe(true);
    expect(stored?.contentType).toBe('application/gzip');
    // Create, 4 parts (of 5000 bytes: each reaches the part size at a chunk boundary), complete; none open.
    expect(aws.calls.slice(before)).toEqual([
      'S3.POST /preview-artifacts/sources/parts.tar.gz',
      ...Array(4).fill('S3.PUT /preview-artifacts/sources/parts.tar.gz'),
      'S3.POST /preview-artifacts/sources/parts.tar.gz',
    ]);
    expect(aws.uploads.size).toBe(0);
  });

  test('S3Artifacts: a stream that fails midway aborts its multipart upload and stores nothing', async () => {
    const s3 = s3Artifacts({ partSize: 1000 });
    async function* failing() {
      yield Buffer.alloc(1500, 1);
      yield Buffer.alloc(1500, 2);
      throw new Error('the tarball download broke');
    }
    await expect(
      s3.put('sources/broken.tar.gz', Readable.from(failing()), 'application/gzip'),
    ).rejects.toThrow('the tarball download broke');
    expect(aws.objects.has('preview-artifacts/sources/broken.tar.gz')).toBe(false);
    expect(aws.uploads.size).toBe(0);
    expect(aws.calls.at(-1)).toBe('S3.DELETE /preview-artifacts/sources/broken.tar.gz');
  });
});
