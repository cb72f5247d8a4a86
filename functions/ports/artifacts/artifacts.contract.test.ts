import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { LocalArtifacts } from './local-files.js';
import type { Artifacts } from './port.js';
import { S3Artifacts } from './s3.js';

/*
 * The Artifacts contract, run against every adapter: local files, and S3 through a real S3Client pointed
 * at the loopback AWS fake (its endpoint given by AWS_ENDPOINT_URL_S3, as in the cloud tier), both as one
 * PutObject and as a multipart upload (a stream longer than lib-storage's 5 MiB part). What the fake
 * can't answer (a refused HEAD, a part that fails) is checked at the SDK boundary with aws-sdk-client-mock.
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

const MiB = 1024 * 1024;

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
const s3Artifacts = () => new S3Artifacts(new S3Client({ region: 'eu-west-1' }), 'preview-artifacts');
artifactsContract('S3Artifacts', () => s3Artifacts());

/** `n` bytes of a pattern, in chunks of `chunk` bytes. */
function payload(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7) % 256;
  return b;
}
const chunked = (b: Buffer, chunk: number) =>
  Array.from({ length: Math.ceil(b.length / chunk) }, (_, i) => b.subarray(i * chunk, (i + 1) * chunk));

describe('specifics', () => {
  test('LocalArtifacts writes the bytes under the data dir and refuses keys that climb out', async () => {
    const store = new LocalArtifacts(dir);
    await store.put('sources/x.tar.gz', Readable.from([Buffer.from('bytes')]), 'application/gzip');
    expect(readFileSync(store.location('sources/x.tar.gz'), 'utf8')).toBe('bytes');
    expect(() => store.location('../escape')).toThrow();
  });

  test('S3Artifacts puts the object in its bucket, byte for byte, with its content type', async () => {
    const s3 = s3Artifacts();
    const bytes = payload(5000);
    const before = aws.calls.length;
    await s3.put(
      'sources/y.tar.gz',
      Readable.from([bytes.subarray(0, 100), bytes.subarray(100)]),
      'application/gzip',
    );
    expect(aws.calls.slice(before)).toEqual(['S3.PUT /preview-artifacts/sources/y.tar.gz']);
    const stored = aws.objects.get('preview-artifacts/sources/y.tar.gz');
    expect(stored?.body.equals(bytes)).toBe(true);
    expect(stored?.contentType).toBe('application/gzip');
    expect(s3.location('sources/y.tar.gz')).toBe('s3://preview-artifacts/sources/y.tar.gz');
  });

  test('S3Artifacts: a stream longer than a part goes up in 5 MiB parts, reassembled byte for byte', async () => {
    const s3 = s3Artifacts();
    const bytes = payload(11 * MiB + 123);
    const before = aws.calls.length;
    await s3.put('sources/parts.tar.gz', Readable.from(chunked(bytes, 64 * 1024)), 'application/gzip');
    const stored = aws.objects.get('preview-artifacts/sources/parts.tar.gz');
    expect(stored?.body.equals(bytes)).toBe(true);
    expect(stored?.contentType).toBe('application/gzip');
    // Create, 3 parts (5 MiB, 5 MiB, the rest), complete; none left open.
    const calls = aws.calls.slice(before);
    expect(calls[0]).toBe('S3.POST /preview-artifacts/sources/parts.tar.gz');
    expect(calls.slice(1, -1)).toEqual(Array(3).fill('S3.PUT /preview-artifacts/sources/parts.tar.gz'));
    expect(calls.at(-1)).toBe('S3.POST /preview-artifacts/sources/parts.tar.gz');
    expect(aws.uploads.size).toBe(0);
  });

  test('S3Artifacts: a stream that fails midway aborts its multipart upload and stores nothing', async () => {
    const s3 = s3Artifacts();
    async function* failing() {
      yield Buffer.alloc(4 * MiB, 1);
      yield Buffer.alloc(4 * MiB, 2);
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

describe('S3Artifacts at the SDK boundary', () => {
  const client = new S3Client({
    region: 'eu-west-1',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
  const mock = mockClient(client);
  afterEach(() => {
    mock.reset();
  });
  const s3Error = (name: string, status: number) =>
    new S3ServiceException({ name, $fault: 'client', $metadata: { httpStatusCode: status }, message: name });

  test('exists is a HeadObject of the key: NotFound is false, any other failure throws', async () => {
    const store = new S3Artifacts(client, 'preview-artifacts');
    mock.on(HeadObjectCommand, { Key: 'sources/here' }).resolves({ ContentLength: 3 });
    mock.on(HeadObjectCommand, { Key: 'sources/missing' }).rejects(s3Error('NotFound', 404));
    mock.on(HeadObjectCommand, { Key: 'sources/denied' }).rejects(s3Error('Forbidden', 403));
    expect(await store.exists('sources/here')).toBe(true);
    expect(await store.exists('sources/missing')).toBe(false);
    await expect(store.exists('sources/denied')).rejects.toMatchObject({ name: 'Forbidden' });
    expect(mock.commandCalls(HeadObjectCommand).map((c) => c.args[0].input)).toEqual([
      { Bucket: 'preview-artifacts', Key: 'sources/here' },
      { Bucket: 'preview-artifacts', Key: 'sources/missing' },
      { Bucket: 'preview-artifacts', Key: 'sources/denied' },
    ]);
  });

  test('a short stream is one PutObject with its content type', async () => {
    mock.on(PutObjectCommand).resolves({});
    await new S3Artifacts(client, 'preview-artifacts').put(
      'sources/s.tar.gz',
      Readable.from([Buffer.from('abc'), Buffer.from('def')]),
      'application/gzip',
    );
    const [put] = mock.commandCalls(PutObjectCommand);
    expect(put!.args[0].input).toMatchObject({
      Bucket: 'preview-artifacts',
      Key: 'sources/s.tar.gz',
      ContentType: 'application/gzip',
    });
    expect(Buffer.from(put!.args[0].input.Body as Uint8Array).toString()).toBe('abcdef');
  });

  test('a part S3 refuses aborts the multipart upload; the caller sees S3’s error', async () => {
    mock.on(CreateMultipartUploadCommand).resolves({ UploadId: 'up-1' });
    mock.on(UploadPartCommand).rejects(s3Error('SlowDown', 503));
    mock.on(AbortMultipartUploadCommand).resolves({});
    const bytes = payload(6 * MiB);
    await expect(
      new S3Artifacts(client, 'preview-artifacts', 1).put(
        'sources/p.tar.gz',
        Readable.from(chunked(bytes, MiB)),
        'application/gzip',
      ),
    ).rejects.toMatchObject({ name: 'SlowDown' });
    expect(mock.commandCalls(CreateMultipartUploadCommand)[0]!.args[0].input).toMatchObject({
      Bucket: 'preview-artifacts',
      Key: 'sources/p.tar.gz',
      ContentType: 'application/gzip',
    });
    expect(mock.commandCalls(AbortMultipartUploadCommand).map((c) => c.args[0].input)).toEqual([
      { Bucket: 'preview-artifacts', Key: 'sources/p.tar.gz', UploadId: 'up-1' },
    ]);
    expect(mock.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });
});
